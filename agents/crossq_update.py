"""CrossQ: Bhatt et al., "CrossQ: Batch Normalization in Deep Reinforcement Learning for
Greater Sample Efficiency and Simplicity" (ICLR 2024).

SAC (agents/sac_update.py) without target networks: the actor and the critics hold
batch renormalisation layers (networks/batch_renorm.py), and the critics' TD target
comes from the critics themselves, in the same forward pass as their estimate. That pass
runs on the current state-actions and the next ones together, so that the layers'
batch statistics cover both distributions (the paper's section 3: normalising them
apart makes the next state-actions look out of distribution). The update follows
sb3-contrib's `CrossQ.train`, so that the two compare at the same settings:

- the next actions come from the policy with its running statistics (eval mode);
- one training pass of the critics on [s, s'] x [a, a'] moves their statistics; the
  target r + gamma (1 - terminated) (min_i Q_i(s', a') - alpha log pi(a'|s')) is taken
  from it without gradient, and the critics step on half the sum of their MSEs;
- every `policy_delay` updates: a fresh policy sample on the batch in a training pass
  (it moves the actor's statistics), the temperature's step on it, and the actor's step
  on the critics with their running statistics;
- Adam with beta1 0.5 for the actor and the critics (the paper's; sb3-contrib's
  default), the temperature with Adam's usual betas.

No target network means no `tau`: the config refuses it (agents/registry.py `targets`).
This is the readable reference, autograd's gradients stepped by `torch.optim.Adam`;
agents/crossq_fused.py computes the same update by hand, and agents/crossq.py is the
algorithm's entry that chooses between the two.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.agents.base import Batch
from rltrain.agents.registry import CrossQOptions
from rltrain.agents.sac_update import PROBE_SEED, LogTemperature, SACAgent
from rltrain.networks.batch_renorm import Renorm, training
from rltrain.networks.critic import Critic
from rltrain.networks.gaussian_actor import GaussianActor
from rltrain.networks.mlp import NetworkSpec

STATE_KEYS = ("actor", "critic", "actor_optimizer", "critic_optimizer", "updates",
              "agent_generator", "log_ent_coef", "ent_coef_optimizer")
BETAS = (0.5, 0.999)  # Adam's of the actor and the critics (the paper's)
TEMPERATURE_BETAS = (0.9, 0.999)  # Adam's usual ones


def renorm(options: CrossQOptions) -> Renorm:
    """The batch renormalisation settings of `options`."""
    return Renorm(options.batch_norm_momentum, options.batch_norm_eps,
                  options.renorm_warmup_steps)


class CrossQAgent(SACAgent):
    """Batch-renormalised Gaussian policy and twin critic, no targets, the temperature."""

    section = "crossq"
    keeps_target = False

    def _make_actor(self, obs_dim: int, action_low: np.ndarray,
                    action_high: np.ndarray) -> GaussianActor:
        return make_actor(obs_dim, action_low, action_high, self.settings.actor_net,
                          self.options)

    def _make_critic(self, obs_dim: int, action_low: np.ndarray,
                     action_high: np.ndarray) -> Critic:
        return Critic(obs_dim, action_low, action_high, self.settings.critic_net,
                      renorm=renorm(self.options))

    def _make_optimiser(self, net: nn.Module, lr: float) -> Any:
        return torch.optim.Adam(net.parameters(), lr=lr, betas=betas(net), fused=True)

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One critic step and, every `policy_delay` updates, one temperature and actor
        step; actor metrics only on the updates that stepped the actor."""
        self.updates += 1
        ent_coef = self.log_ent_coef.detach().exp()  # this update's: before its own step
        metrics = self._critic_step(batch, ent_coef)
        if self.updates % self.options.policy_delay == 0:
            # A fresh policy sample on the batch: a training pass of the actor's layers
            with training(self.actor):
                actions_pi, log_prob = self.actor.sample(batch.obs, self.generator)
            metrics.update(self._temperature_step(log_prob))
            metrics.update(self._actor_step(batch.obs, actions_pi, log_prob, ent_coef))
            metrics["ent_coef"] = ent_coef[0]
            metrics["entropy"] = -log_prob.detach().mean()
        return metrics

    def critic_loss(self, batch: Batch, ent_coef: torch.Tensor,
                    generator: torch.Generator | None = None,
                    track: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Half the sum of the critics' MSE to the soft TD target, and Q [n, B, 1], from one
        training pass of the critics over the current and next state-actions (`track`:
        the pass moves their running statistics)."""
        rows = batch.obs.shape[0]
        with torch.no_grad():  # the policy with its running statistics (eval mode)
            next_actions, next_log_prob = self.actor.sample(batch.next_obs,
                                                            generator or self.generator)
        with training(self.critic, track):
            both = self.critic(torch.cat([batch.obs, batch.next_obs]),
                               torch.cat([batch.actions, next_actions]))  # [n, 2B, 1]
        q, q_next = both.split(rows, dim=1)
        with torch.no_grad():
            soft_q = q_next.min(dim=0).values - ent_coef * next_log_prob
            # A time-limit truncation is not the end of the task: bootstrap through it.
            target = batch.rewards + self.settings.gamma * (1.0 - batch.terminated) * soft_q
        return 0.5 * (q - target).square().mean(dim=(1, 2)).sum(), q

    def probe_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The update's losses on `batch`, from training passes that move no statistics and
        a random stream of the probe's own: the agent is left as it was."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(PROBE_SEED)
        ent_coef = self.log_ent_coef.detach().exp()
        critic_loss, q = self.critic_loss(batch, ent_coef, generator, track=False)
        with training(self.actor, track=False):
            actions_pi, log_prob = self.actor.sample(batch.obs, generator)
        return critic_loss, self.actor_loss(batch.obs, actions_pi, log_prob, ent_coef), q


def betas(net: nn.Module) -> tuple[float, float]:
    """Adam's betas for the optimiser of `net`: the actor's, a critic's or the
    temperature's."""
    return TEMPERATURE_BETAS if isinstance(net, LogTemperature) else BETAS


def make_actor(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
               spec: NetworkSpec, options: CrossQOptions) -> GaussianActor:
    """The policy network of CrossQ (what `rltrain eval` loads a checkpoint's actor into)."""
    return GaussianActor(obs_dim, action_low, action_high, spec, renorm=renorm(options))
