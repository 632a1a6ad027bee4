"""SAC: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018).

A tanh-squashed Gaussian policy (networks/gaussian_actor.py), twin critics with a
Polyak-averaged target, and the entropy temperature alpha, fixed or learnt towards a
target entropy (-dim(A) by default). The update follows Stable-Baselines3's `SAC.train`
step by step, so that the two are comparable at the same settings: a fresh policy
sample on the batch; the temperature's step on it (the critics and the actor use the
temperature from before that step); the critics on the soft TD target; the actor on
the stepped critics; then the target critics.

This module is update maths only, like agents/deterministic.py: `act`, `update(batch)
-> metrics`, `state_dict`. Metrics are detached tensors on the agent's device. The
gradients are autograd's; agents/sac_flat.py steps them with rltrain's flat Adam,
agents/sac_fused.py computes them by hand, and agents/sac.py is the algorithm's entry
that chooses among the three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.agents.base import Batch, CommonSettings
from rltrain.agents.stepping import adam_step, load_generator, load_optimiser
from rltrain.networks.critic import Critic
from rltrain.networks.gaussian_actor import GaussianActor

STATE_KEYS = ("actor", "critic", "critic_target", "actor_optimizer", "critic_optimizer",
              "updates", "agent_generator", "log_ent_coef", "ent_coef_optimizer")
PROBE_SEED = 0  # the probe's own stream: probing never draws from the agent's


@dataclass(frozen=True)
class Temperature:
    """What `sac.ent_coef` means: learnt from `start`, or fixed at `start`."""

    learnt: bool
    start: float

    @classmethod
    def parse(cls, setting: str | float, section: str = "sac") -> "Temperature":
        """`setting` of the config key `<section>.ent_coef`."""
        if isinstance(setting, str):
            if setting == "auto":
                return cls(True, 1.0)
            if setting.startswith("auto_"):
                start = _positive(setting[len("auto_"):])
                if start is not None:
                    return cls(True, start)
            raise ValueError(f"{section}.ent_coef {setting!r} is not auto, auto_<start> (e.g. "
                             "auto_0.1) or a positive number")
        if not setting > 0:
            raise ValueError(f"{section}.ent_coef must be positive, got {setting}")
        return cls(False, float(setting))


def _positive(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 and math.isfinite(value) else None


class LogTemperature(nn.Module):
    """log(alpha) as a module's one parameter (what an optimiser steps), trained only
    when the temperature is learnt."""

    def __init__(self, temperature: Temperature) -> None:
        super().__init__()
        self.log_ent_coef = nn.Parameter(torch.full((1,), math.log(temperature.start)),
                                         requires_grad=temperature.learnt)


class SACAgent:
    """Gaussian policy, twin critic and its target, the temperature and their optimisers.

    The algorithms that differ from SAC in their networks or update
    (agents/crossq_update.py, agents/tqc_update.py) subclass it: `_make_actor`,
    `_make_critic` and `keeps_target` say what they are built of."""

    section = "sac"  # the config section of its options, for messages
    keeps_target = True  # a Polyak-averaged copy of the critic (`critic_target`)

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 common: CommonSettings, options: Any, device: torch.device) -> None:
        self.settings, self.options, self.device = common, options, device
        # Eval mode between updates (agents/base.py `Agent`).
        self.actor = self._make_actor(obs_dim, action_low, action_high).to(device).eval()
        self.critic = self._make_critic(obs_dim, action_low, action_high).to(device).eval()
        self.critic_target: nn.Module | None = None
        if self.keeps_target:
            self.critic_target = self._make_critic(
                obs_dim, action_low, action_high).to(device).eval().requires_grad_(False)
            self.critic_target.load_state_dict(self.critic.state_dict())
        self.actor_opt = self._make_optimiser(self.actor, common.actor_lr)
        self.critic_opt = self._make_optimiser(self.critic, common.critic_lr)
        self.temperature = Temperature.parse(options.ent_coef, self.section)
        action_dim = len(action_low)
        self.target_entropy = (-float(action_dim) if options.target_entropy == "auto"
                               else float(options.target_entropy))
        # log(alpha): learnt with the actor's rate (SB3 uses its one rate for all three)
        self.log_temperature = LogTemperature(self.temperature).to(device)
        self.log_ent_coef = self.log_temperature.log_ent_coef
        self.ent_coef_opt = self._make_optimiser(self.log_temperature, common.actor_lr)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(common.seed)
        self.updates = 0
        # The latest sampled action's noise (standard normal) and mean action, for the
        # ignored_action rule (Exploration.drawn).
        self.drawn: tuple[np.ndarray, np.ndarray] | None = None

    def _make_actor(self, obs_dim: int, action_low: np.ndarray,
                    action_high: np.ndarray) -> GaussianActor:
        return GaussianActor(obs_dim, action_low, action_high, self.settings.actor_net)

    def _make_critic(self, obs_dim: int, action_low: np.ndarray,
                     action_high: np.ndarray) -> Critic:
        return Critic(obs_dim, action_low, action_high, self.settings.critic_net)

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The policy's mode (deterministic) or a sample from it, for one observation
        [obs_dim] or one per row of [N, obs_dim]."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        rows = obs_t.unsqueeze(0) if obs_t.dim() == 1 else obs_t
        if deterministic:
            action = self.actor(rows)
        else:  # a sampled action, keeping its noise and the mean action (`drawn`)
            acting = self.actor(rows, explore=True, generator=self.generator)
            action = acting.action
            self.drawn = tuple((x if obs_t.dim() > 1 else x[0]).cpu().numpy()
                               for x in (acting.noise, acting.mode))
        return action[0].cpu().numpy() if obs_t.dim() == 1 else action.cpu().numpy()

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One temperature, critic and actor step, and the target critic every
        `target_update_interval` updates."""
        self.updates += 1
        # Sample the current policy on the batch: the temperature's and the actor's input
        actions_pi, log_prob = self.actor.sample(batch.obs, self.generator)
        ent_coef = self.log_ent_coef.detach().exp()  # this update's: before its own step
        metrics = self._temperature_step(log_prob)
        metrics.update(self._critic_step(batch, ent_coef))
        metrics.update(self._actor_step(batch.obs, actions_pi, log_prob, ent_coef))
        metrics["ent_coef"] = ent_coef[0]
        metrics["entropy"] = -log_prob.detach().mean()
        if self.updates % self.options.target_update_interval == 0:
            self._soft_update_target()
        return metrics

    def _temperature_step(self, log_prob: torch.Tensor) -> dict[str, torch.Tensor]:
        if not self.temperature.learnt:
            return {}
        # Raise alpha while the policy's entropy (-log pi) is under its target.
        loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
        self._step(self.ent_coef_opt, self.log_temperature, loss, clip=False)
        return {"ent_coef_loss": loss.detach()}

    def td_target(self, batch: Batch, ent_coef: torch.Tensor,
                  generator: torch.Generator | None = None) -> torch.Tensor:
        """r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha log pi(a'|s')), with
        a' sampled from the current policy, [B, 1]."""
        with torch.no_grad():
            next_actions, next_log_prob = self.actor.sample(batch.next_obs,
                                                            generator or self.generator)
            target_q = self.critic_target(batch.next_obs, next_actions).min(dim=0).values
            soft_q = target_q - ent_coef * next_log_prob
            # A time-limit truncation is not the end of the task: bootstrap through it.
            return batch.rewards + self.settings.gamma * (1.0 - batch.terminated) * soft_q

    def critic_loss(self, batch: Batch, ent_coef: torch.Tensor,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Half the sum of the critics' MSE to the soft TD target (as SB3), and Q [n, B, 1]."""
        target = self.td_target(batch, ent_coef, generator)
        q = self.critic(batch.obs, batch.actions)
        return 0.5 * (q - target).square().mean(dim=(1, 2)).sum(), q

    def actor_loss(self, obs: torch.Tensor, actions_pi: torch.Tensor, log_prob: torch.Tensor,
                   ent_coef: torch.Tensor) -> torch.Tensor:
        """mean(alpha log pi(a|s) - min_i Q_i(s, a)). The critics' parameters are frozen
        while it is built: the loss reaches the actor through the critics' input only, and
        nothing of it lands in the critics' `.grad`."""
        self.critic.requires_grad_(False)
        try:
            q_pi = self.critic(obs, actions_pi).min(dim=0).values  # [B, 1]
            return (ent_coef * log_prob - q_pi).mean()
        finally:
            self.critic.requires_grad_(True)

    def _critic_step(self, batch: Batch, ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        # Compute the critic loss and step the critics
        loss, q = self.critic_loss(batch, ent_coef)
        grad_norm = self._step(self.critic_opt, self.critic, loss)
        return {"critic_loss": loss.detach(), "q_mean": q[0].mean().detach(),
                "critic_grad_norm": grad_norm}

    def _actor_step(self, obs: torch.Tensor, actions_pi: torch.Tensor, log_prob: torch.Tensor,
                    ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        # Compute the actor loss on the stepped critics and step the actor
        loss = self.actor_loss(obs, actions_pi, log_prob, ent_coef)
        grad_norm = self._step(self.actor_opt, self.actor, loss)
        return {"actor_loss": loss.detach(), "actor_grad_norm": grad_norm}

    def _make_optimiser(self, net: nn.Module, lr: float) -> Any:
        # fused: one kernel steps all of a network's parameters; it honours `found_inf`.
        return torch.optim.Adam(net.parameters(), lr=lr, fused=True)

    def _step(self, optimiser: Any, net: nn.Module, loss: torch.Tensor,
              clip: bool = True) -> torch.Tensor:
        """One optimiser step on `loss` (clipped if configured and `clip`); the gradient
        norm before clipping."""
        return adam_step(optimiser, net, loss, self.settings.grad_clip_norm if clip else None)

    @torch.no_grad()
    def _soft_update_target(self) -> None:
        # Polyak averaging: target <- target + tau * (online - target)
        for param, target in zip(self.critic.parameters(), self.critic_target.parameters(),
                                 strict=True):
            target.lerp_(param, self.settings.tau)

    # ------------------------------------------------------------ the interface
    def networks(self) -> dict[str, nn.Module]:
        found = {"actor": self.actor, "critic": self.critic}
        if self.critic_target is not None:
            found["critic_target"] = self.critic_target
        return found

    def optimizers(self) -> dict[str, Any]:
        found = {"actor": self.actor_opt, "critic": self.critic_opt}
        if self.temperature.learnt:
            found["ent_coef"] = self.ent_coef_opt
        return found

    def probe_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Critic and actor losses on `batch` with their graphs, sampling from a stream of
        the probe's own (the agent's random stream is left as it is)."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(PROBE_SEED)
        ent_coef = self.log_ent_coef.detach().exp()
        critic_loss, q = self.critic_loss(batch, ent_coef, generator)
        actions_pi, log_prob = self.actor.sample(batch.obs, generator)
        return critic_loss, self.actor_loss(batch.obs, actions_pi, log_prob, ent_coef), q

    def _load_optimiser(self, optimiser: Any, saved: dict[str, Any], lr: float) -> None:
        load_optimiser(optimiser, saved, lr)

    def parameters_finite(self) -> bool:
        params = [*self.actor.parameters(), *self.critic.parameters(), self.log_ent_coef]
        return bool(torch.stack([torch.isfinite(p).all() for p in params]).all())

    def reseed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def restore_warnings(self) -> list[str]:
        return []

    def state_dict(self) -> dict[str, Any]:
        return {
            **{name: net.state_dict() for name, net in self.networks().items()},
            "actor_optimizer": self.actor_opt.state_dict(),
            "critic_optimizer": self.critic_opt.state_dict(),
            "log_ent_coef": self.log_ent_coef.detach().clone(),
            "ent_coef_optimizer": self.ent_coef_opt.state_dict(),
            "updates": self.updates,
            "agent_generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore everything `state_dict` saved; whether the agent's random stream
        continues (False for a checkpoint from the other kind of device)."""
        for name, net in self.networks().items():
            net.load_state_dict(state[name])
        self._load_optimiser(self.actor_opt, state["actor_optimizer"], self.settings.actor_lr)
        self._load_optimiser(self.critic_opt, state["critic_optimizer"],
                             self.settings.critic_lr)
        # The temperature continues where it was learnt; a fixed one, or a learnt one that
        # was fixed in the checkpoint (a resume that changed sac.ent_coef), starts from
        # the config's value, as the config's learning rates win over the saved ones. A
        # fixed temperature's optimiser never steps (a flat Adam's state from before it
        # kept none until its first step says step 0).
        was_learnt = any(float(entry["step"]) > 0
                         for entry in state["ent_coef_optimizer"].get("state", {}).values())
        if self.temperature.learnt and was_learnt:
            with torch.no_grad():
                self.log_ent_coef.copy_(torch.as_tensor(state["log_ent_coef"]).reshape(1))
            self._load_optimiser(self.ent_coef_opt, state["ent_coef_optimizer"],
                                 self.settings.actor_lr)
        self.updates = int(state["updates"])
        return load_generator(self.generator, state["agent_generator"])
