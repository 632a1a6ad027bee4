"""The deterministic actor-critic update of DDPG and TD3, written the standard way, with
autograd and torch's Adam (agents/ddpg.py and agents/td3.py are the two algorithms'
entries over it).

DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning" (2016).
TD3:  Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods"
      (2018): delayed actor/target updates and target policy smoothing.
rltrain's DDPG keeps twin critics and the min of their two targets (clipped double Q);
`algo: ddpg` means policy_delay 1 and no target smoothing.

This module is update maths only: `act(obs)`, `update(batch) -> metrics`,
`state_dict()`. It never touches an env, a file, a logger or rltrain's config: its
hyperparameters come as `DDPGSettings`, a batch as anything with `Batch`'s fields.
Metrics come back as detached tensors on the agent's device, so the training loop
reads them in one transfer and nothing here waits for a GPU.

agents/fused.py is an accelerated implementation of exactly this update for the stock
ReLU MLPs (`update_backend`); tests/test_backends.py checks that the two agree.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.agents.base import Batch, CommonSettings
from rltrain.agents.stepping import adam_step, load_generator, load_optimiser
from rltrain.networks.actor import Actor
from rltrain.networks.critic import Critic

__all__ = ["Batch", "DDPGAgent", "DDPGSettings", "STATE_KEYS"]

# What `DDPGAgent.state_dict` writes: the keys a DDPG or TD3 checkpoint must hold.
STATE_KEYS = ("actor", "critic", "actor_target", "critic_target", "actor_optimizer",
              "critic_optimizer", "updates", "agent_generator")


@dataclass(frozen=True)
class DDPGSettings(CommonSettings):
    """The update's hyperparameters (rltrain's config names, see `rltrain config`); the
    seed seeds the target smoothing noise."""

    policy_delay: int = 1             # TD3: 2
    target_noise: float = 0.0         # TD3: 0.2, relative to the action half-range
    target_noise_clip: float = 0.5


class DDPGAgent:
    """Actor, twin critic, their targets and optimisers, and the update rule."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 settings: DDPGSettings, device: torch.device) -> None:
        self.settings, self.device = settings, device
        # Eval mode, as the interface has every network outside `update` (agents/base.py);
        # none of these layers depends on it.
        self.actor = Actor(obs_dim, action_low, action_high, settings.actor_net).to(device).eval()
        self.critic = Critic(obs_dim, action_low, action_high,
                             settings.critic_net).to(device).eval()
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = self._make_optimiser(self.actor, settings.actor_lr)
        self.critic_opt = self._make_optimiser(self.critic, settings.critic_lr)
        # The target smoothing noise has its own generator, saved in checkpoints.
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(settings.seed)
        self.updates = 0
        self.drawn = None  # the collector draws the noise it explores with

    def _make_optimiser(self, net: nn.Module, lr: float) -> Any:
        # fused: one kernel steps all of a network's parameters.
        return torch.optim.Adam(net.parameters(), lr=lr, fused=True)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The deterministic action for one observation [obs_dim], or one per row of
        [N, obs_dim]. Exploring changes nothing here: the collector adds the configured
        noise (`Algorithm.adds_action_noise`)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        if obs_t.dim() == 1:
            return self.actor(obs_t.unsqueeze(0))[0].cpu().numpy()
        return self.actor(obs_t).cpu().numpy()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One critic update and, every `policy_delay` updates, one actor + target update.

        Actor metrics are present only on updates that stepped the actor.
        """
        self.updates += 1
        metrics = self._critic_step(batch)
        if self.updates % self.settings.policy_delay == 0:
            metrics.update(self._actor_step(batch.obs))
            self._soft_update_targets()
        return metrics

    @torch.no_grad()
    def td_target(self, batch: Batch, smooth: bool = True) -> torch.Tensor:
        """r + gamma * (1 - terminated) * min_i Q'_i(s', pi'(s')), [B, 1]. `smooth=False`
        leaves out TD3's target noise (and so the agent's random stream)."""
        s = self.settings
        next_action = self.actor_target(batch.next_obs)
        if smooth and s.target_noise > 0:
            # TD3 target policy smoothing: clipped noise, relative to the action half-range.
            noise = torch.randn(next_action.shape, device=self.device, generator=self.generator)
            noise = (noise * s.target_noise).clamp(-s.target_noise_clip, s.target_noise_clip)
            scale, bias = self.actor.action_scale, self.actor.action_bias
            next_action = (next_action + noise * scale).clamp(bias - scale, bias + scale)
        target_q = self.critic_target(batch.next_obs, next_action).min(dim=0).values  # [B, 1]
        # Bootstrap unless the episode truly terminated: a time-limit truncation is not
        # the end of the task, so its next state still has value.
        return batch.rewards + s.gamma * (1.0 - batch.terminated) * target_q

    def critic_loss(self, batch: Batch, smooth: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """The sum of each critic's MSE to the TD target, and the critics' Q [n, B, 1]."""
        target_q = self.td_target(batch, smooth)
        q = self.critic(batch.obs, batch.actions)
        return (q - target_q).square().mean(dim=(1, 2)).sum(), q

    def actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """-mean Q1(s, pi(s)). The critic's parameters are frozen while it is built: the
        loss reaches the actor through the critic's input, and the critic's weights need
        no gradient (it would be wasted work, and would land in the critic's `.grad`)."""
        self.critic.requires_grad_(False)
        try:
            return -self.critic.q1(obs, self.actor(obs)).mean()
        finally:
            self.critic.requires_grad_(True)

    def _critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        # Compute the critic loss and step the critic
        loss, q = self.critic_loss(batch)
        grad_norm = self._step(self.critic_opt, self.critic, loss)
        return {"critic_loss": loss.detach(), "q_mean": q[0].mean().detach(),
                "critic_grad_norm": grad_norm}

    def _actor_step(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        # Compute the actor loss and step the actor
        loss = self.actor_loss(obs)
        grad_norm = self._step(self.actor_opt, self.actor, loss)
        return {"actor_loss": loss.detach(), "actor_grad_norm": grad_norm}

    def _step(self, optimiser: Any, net: nn.Module, loss: torch.Tensor) -> torch.Tensor:
        """One optimiser step on `loss`; the gradient norm before clipping."""
        return adam_step(optimiser, net, loss, self.settings.grad_clip_norm)

    @torch.no_grad()
    def _soft_update_targets(self) -> None:
        # Polyak averaging: target <- target + tau * (online - target)
        for online, target in ((self.actor, self.actor_target),
                               (self.critic, self.critic_target)):
            for param, target_param in zip(online.parameters(), target.parameters(),
                                           strict=True):
                target_param.lerp_(param, self.settings.tau)

    def networks(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "actor_target": self.actor_target,
                "critic_target": self.critic_target}

    def optimizers(self) -> dict[str, Any]:
        return {"actor": self.actor_opt, "critic": self.critic_opt}

    def probe_losses(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Critic loss (without target smoothing noise: no random draw), actor loss and the
        critics' Q [n, B, 1], with their autograd graphs."""
        critic_loss, q = self.critic_loss(batch, smooth=False)
        return critic_loss, self.actor_loss(batch.obs), q

    def reseed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def restore_warnings(self) -> list[str]:
        return []

    def parameters_finite(self) -> bool:
        params = [p for net in (self.actor, self.critic) for p in net.parameters()]
        return bool(torch.stack([torch.isfinite(p).all() for p in params]).all())

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_opt.state_dict(),
            "critic_optimizer": self.critic_opt.state_dict(),
            "updates": self.updates,
            "agent_generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore everything `state_dict` saved; returns whether the target-noise stream
        continues (False for a checkpoint from the other kind of device)."""
        for name in ("actor", "critic", "actor_target", "critic_target"):
            getattr(self, name).load_state_dict(state[name])
        self._load_optimiser(self.actor_opt, state["actor_optimizer"], self.settings.actor_lr)
        self._load_optimiser(self.critic_opt, state["critic_optimizer"],
                             self.settings.critic_lr)
        self.updates = int(state["updates"])
        return self._load_generator(state["agent_generator"])

    def _load_optimiser(self, optimiser: Any, saved: dict[str, Any], lr: float) -> None:
        load_optimiser(optimiser, saved, lr)

    def _load_generator(self, saved: torch.Tensor) -> bool:
        return load_generator(self.generator, saved)
