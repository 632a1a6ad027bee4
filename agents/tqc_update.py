"""TQC's update: Kuznetsov et al., "Controlling Overestimation Bias with Truncated
Mixture of Continuous Distributional Quantile Critics" (ICML 2020).

SAC (agents/sac_update.py) with distributional critics (networks/quantile_critic.py):
each of `n_critics` critics predicts `n_quantiles` quantiles of the return. The target
pools the target critics' quantiles at the next state and a sampled next action, sorts
them and drops the `top_quantiles_to_drop_per_net * n_critics` highest: the
overestimation control, in place of SAC's min over two critics (the paper's section
4). Each critic's quantiles regress onto every kept target atom with the quantile Huber
loss (QR-DQN, Dabney et al. 2018); the actor maximises the mean of all critics'
quantiles. The steps and their order are SAC's (and sb3-contrib's `TQC.train`): a fresh
policy sample, the temperature's step, the critics', the actor's on the stepped
critics, then the target critics every `target_update_interval` updates.

This module is the readable reference: autograd's gradients, stepped by
`torch.optim.Adam`. agents/tqc.py is the algorithm's entry, which chooses between it, the
same update stepped by the flat Adam, and the hand-written one of agents/tqc_fused.py.
"""

from __future__ import annotations

import numpy as np
import torch

from rltrain.agents.base import Batch
from rltrain.agents.sac_update import SACAgent
from rltrain.networks.quantile_critic import QuantileCritic


def quantile_levels(n_quantiles: int, like: torch.Tensor) -> torch.Tensor:
    """The levels (2i + 1) / 2Q of `n_quantiles` quantiles, [Q], on `like`'s device and
    dtype."""
    return (torch.arange(n_quantiles, device=like.device, dtype=like.dtype)
            + 0.5) / n_quantiles


def quantile_huber_loss(quantiles: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The quantile regression loss with a Huber kernel (threshold 1) of `quantiles`
    [n, B, Q] at the levels (2i + 1) / 2Q onto every atom of `target` [B, K], averaged
    over critics, rows, quantiles and atoms."""
    levels = quantile_levels(quantiles.shape[-1], quantiles)
    delta = target[None, :, None, :] - quantiles.unsqueeze(-1)  # [n, B, Q, K]
    size = delta.abs()
    huber = torch.where(size > 1.0, size - 0.5, 0.5 * delta.square())
    # An atom under the quantile pulls it down with weight 1 - level, one above pulls it
    # up with weight level.
    weight = (levels[:, None] - (delta.detach() < 0).to(delta.dtype)).abs()
    return (weight * huber).mean()


class TQCAgent(SACAgent):
    """Gaussian policy, quantile critics and their targets, the temperature."""

    section = "tqc"

    def _make_critic(self, obs_dim: int, action_low: np.ndarray,
                     action_high: np.ndarray) -> QuantileCritic:
        return QuantileCritic(obs_dim, action_low, action_high, self.settings.critic_net,
                              self.options.n_critics, self.options.n_quantiles)

    def td_target(self, batch: Batch, ent_coef: torch.Tensor,
                  generator: torch.Generator | None = None) -> torch.Tensor:
        """r + gamma * (1 - terminated) * (z - alpha log pi(a'|s')) for each kept atom z of
        the target critics' pooled quantiles at (s', a'), a' from the current policy;
        [B, kept]."""
        with torch.no_grad():
            next_actions, next_log_prob = self.actor.sample(batch.next_obs,
                                                            generator or self.generator)
            quantiles = self.critic_target.quantiles(batch.next_obs, next_actions)  # [n, B, Q]
            pooled = quantiles.transpose(0, 1).reshape(quantiles.shape[1], -1)  # [B, n Q]
            return self.truncated_target(batch, pooled, next_log_prob, ent_coef)

    def truncated_target(self, batch: Batch, pooled: torch.Tensor, next_log_prob: torch.Tensor,
                         ent_coef: torch.Tensor) -> torch.Tensor:
        """The target from the target critics' `pooled` quantiles [B, n Q] at (s', a') and
        log pi(a'|s') [B, 1]: the highest `top_quantiles_to_drop_per_net * n_critics`
        dropped; [B, kept]."""
        options = self.options
        kept = pooled.shape[1] - options.top_quantiles_to_drop_per_net * options.n_critics
        atoms = self._lowest(pooled, kept)
        soft = atoms - ent_coef * next_log_prob
        # A time-limit truncation is not the end of the task: bootstrap through it.
        return batch.rewards + self.settings.gamma * (1.0 - batch.terminated) * soft

    @staticmethod
    def _lowest(pooled: torch.Tensor, kept: int) -> torch.Tensor:
        """The `kept` lowest values of each row of `pooled`, in ascending order."""
        return pooled.sort(dim=1).values[:, :kept]

    def critic_loss(self, batch: Batch, ent_coef: torch.Tensor,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The quantile Huber loss onto the truncated target, and each critic's mean
        quantile [n, B, 1]."""
        target = self.td_target(batch, ent_coef, generator)
        quantiles = self.critic.quantiles(batch.obs, batch.actions)
        return quantile_huber_loss(quantiles, target), quantiles.mean(dim=-1, keepdim=True)

    def actor_loss(self, obs: torch.Tensor, actions_pi: torch.Tensor, log_prob: torch.Tensor,
                   ent_coef: torch.Tensor) -> torch.Tensor:
        """mean(alpha log pi(a|s) - the mean of every critic's quantiles at (s, a)). The
        critics' parameters are frozen while it is built (see SACAgent.actor_loss)."""
        self.critic.requires_grad_(False)
        try:
            q_pi = self.critic(obs, actions_pi).mean(dim=0)  # [B, 1]
            return (ent_coef * log_prob - q_pi).mean()
        finally:
            self.critic.requires_grad_(True)

