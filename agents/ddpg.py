"""DDPG with clipped double-Q targets, and TD3 as an option (sections 3.1-3.2 of the source doc).

DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning" (2016).
TD3:  Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods"
      (2018): delayed actor/target updates and target policy smoothing.
The source document's DDPG already uses twin critics and the min of the two targets; with
`algo: ddpg` that is kept, with policy_delay 1 and no target smoothing.

This module is update maths only: `act(obs)`, `update(batch) -> metrics`,
`state_dict()`. It never touches an env, a file or a logger. Metrics come back as
detached tensors on the agent's device so that the hot loop needs no host sync.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rltrain.networks.actor import Actor
from rltrain.networks.critic import Critic
from rltrain.utils.config import TrainConfig
from rltrain.utils.replay_buffer import Batch


class Optimised:
    """A network's parameters and their Adam optimiser, with cheap per-update bookkeeping.

    The parameter list is taken once: `requires_grad` toggles, gradient resets and norms
    then loop over a plain list instead of walking the module tree on every update.
    Adam is fused (one kernel per step, 2.5x faster than foreach on a 2-core CPU here),
    and fused Adam honours `found_inf`, used to skip non-finite steps without a sync.
    """

    def __init__(self, net: nn.Module, lr: float, device: torch.device) -> None:
        assert device.type in ("cpu", "cuda"), f"unsupported device {device}"
        self.params = list(net.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=lr, fused=True)
        self._moments: tuple[list[torch.Tensor], ...] = ()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)
        self._moments = ()  # the optimiser's state tensors were replaced

    def set_requires_grad(self, flag: bool) -> None:
        for p in self.params:
            p.requires_grad = flag

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self, loss: torch.Tensor, clip_norm: float | None) -> torch.Tensor:
        """Backpropagate `loss`, clip if configured, step; return the norm before clipping.

        If the loss or the gradient is NaN/inf, the step leaves parameters, moments and
        the step count untouched: fused Adam reads `optimizer.found_inf` (the attribute
        GradScaler sets for mixed precision) and skips the update when it is 1. So the
        agent never learns from a NaN, and no host sync is needed to decide it.
        """
        self.zero_grad()
        if not loss.requires_grad:
            # The loss does not depend on these parameters (a detached graph): nothing to
            # learn; the flow-1 `broken_gradient` check reports the missing gradients.
            return torch.zeros((), device=loss.device)
        loss.backward()
        grads = [p.grad for p in self.params if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        if clip_norm is not None:
            # Same rule as clip_grad_norm_: scale by clip / (norm + 1e-6) when above clip.
            scale = torch.clamp(clip_norm / (norm + 1e-6), max=1.0)
            torch._foreach_mul_(grads, scale)
        found_inf = (~torch.isfinite(loss.detach() + norm)).float()
        if len(grads) < len(self.params):  # part of the network got no gradient: torch's
            self.optimizer.found_inf = found_inf  # own step skips those parameters
            self.optimizer.step()
        else:
            self._adam_step(grads, found_inf)
        return norm

    def _adam_step(self, grads: list[torch.Tensor], found_inf: torch.Tensor) -> None:
        """torch.optim.Adam's fused step, minus its per-call Python bookkeeping.

        The first step goes through `Optimizer.step()`, which creates Adam's state; later
        steps call the same fused kernel on the cached state lists, exactly as
        `torch.optim.adam._fused_adam` does (it measured 185 vs 75 us per step here).
        """
        if not self._moments:
            self.optimizer.found_inf = found_inf
            self.optimizer.step()
            states = [self.optimizer.state[p] for p in self.params]
            self._moments = tuple([s[k] for s in states]
                                  for k in ("exp_avg", "exp_avg_sq", "step"))
            return
        exp_avgs, exp_avg_sqs, steps = self._moments
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(self.params, grads, exp_avgs, exp_avg_sqs,
                           [], steps, amsgrad=False, lr=group["lr"], beta1=beta1,
                           beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                           maximize=False, grad_scale=None, found_inf=found_inf)
        torch._foreach_sub_(steps, [found_inf] * len(steps))


class DDPGAgent:
    """Actor, twin critic, their targets and optimisers, and the update rule."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 config: TrainConfig, device: torch.device) -> None:
        self.config = config
        self.device = device
        hidden = config.hidden_sizes
        self.actor = Actor(obs_dim, action_low, action_high, hidden).to(device)
        self.critic = Critic(obs_dim, action_low, action_high, hidden).to(device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = Optimised(self.actor, config.actor_lr, device)
        self.critic_opt = Optimised(self.critic, config.critic_lr, device)
        self.actor_optimizer, self.critic_optimizer = (self.actor_opt.optimizer,
                                                       self.critic_opt.optimizer)
        self._targets = (list(self.actor_target.parameters())
                         + list(self.critic_target.parameters()))
        self._onlines = self.actor_opt.params + self.critic_opt.params
        self.action_low = torch.as_tensor(action_low, dtype=torch.float32, device=device)
        self.action_high = torch.as_tensor(action_high, dtype=torch.float32, device=device)
        # Own generator for target smoothing noise: its state is saved in checkpoints.
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(config.seed + 1)
        is_td3 = config.algo == "td3"
        self.policy_delay = config.td3.policy_delay if is_td3 else 1
        self.target_noise = config.td3.target_policy_noise if is_td3 else 0.0
        self.target_noise_clip = config.td3.target_noise_clip
        self.updates = 0

    @torch.inference_mode()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action for one observation (no exploration noise)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        return self.actor(obs_t.unsqueeze(0))[0].cpu().numpy()

    @torch.inference_mode()
    def act_batch(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions for a batch of observations [N, obs_dim]."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        return self.actor(obs_t).cpu().numpy()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One critic update and, every `policy_delay` updates, one actor + target update.

        Actor metrics are present only on updates that stepped the actor.
        """
        self.updates += 1
        metrics = self._critic_step(batch)
        if self.updates % self.policy_delay == 0:
            metrics.update(self._actor_step(batch.obs))
            self._soft_update_targets()
        return metrics

    def _td_target(self, batch: Batch, smooth: bool = True) -> torch.Tensor:
        next_action = self.actor_target(batch.next_obs)
        if smooth and self.target_noise > 0:
            # TD3 target policy smoothing, noise relative to the action half-range.
            noise = torch.randn(next_action.shape, device=self.device, generator=self.generator)
            noise = (noise * self.target_noise).clamp(-self.target_noise_clip,
                                                      self.target_noise_clip)
            next_action = torch.clamp(next_action + noise * self.actor.action_scale,
                                      self.action_low, self.action_high)
        target_q = self.critic_target(batch.next_obs, next_action).min(dim=0).values  # [B, 1]
        # Bootstrap unless the episode truly terminated: a time-limit truncation is not
        # the end of the task, so its next state still has value (the batch only marks
        # `terminated`; truncated transitions bootstrap like any other).
        return batch.rewards + self.config.gamma * (1.0 - batch.terminated) * target_q

    def critic_loss(self, batch: Batch,
                    smooth: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """The sum of each critic's MSE to the TD target, and the critics' Q [n, B, 1].
        `smooth=False` leaves out TD3's target noise (and the agent's random stream)."""
        with torch.no_grad():
            target_q = self._td_target(batch, smooth)
        current_q = self.critic(batch.obs, batch.actions)  # [n_critics, B, 1]
        loss = F.mse_loss(current_q, target_q.expand_as(current_q), reduction="none")
        return loss.mean(dim=(1, 2)).sum(), current_q

    def actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        return -self.critic.q1(obs, self.actor(obs)).mean()

    @contextlib.contextmanager
    def critic_frozen(self) -> Iterator[None]:
        """The actor loss backpropagates through the critic to the action; gradients for
        the critic's own parameters would be wasted work."""
        self.critic_opt.set_requires_grad(False)
        try:
            yield
        finally:
            self.critic_opt.set_requires_grad(True)

    def _critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        critic_loss, current_q = self.critic_loss(batch)
        grad_norm = self.critic_opt.step(critic_loss, self.config.grad_clip_norm)
        return {"critic_loss": critic_loss.detach(), "q_mean": current_q[0].detach().mean(),
                "critic_grad_norm": grad_norm}

    def _actor_step(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        with self.critic_frozen():
            actor_loss = self.actor_loss(obs)
            grad_norm = self.actor_opt.step(actor_loss, self.config.grad_clip_norm)
        return {"actor_loss": actor_loss.detach(), "actor_grad_norm": grad_norm}

    def parameters_finite(self) -> bool:
        params = [p for net in (self.actor, self.critic) for p in net.parameters()]
        return bool(torch.stack([torch.isfinite(p).all() for p in params]).all())

    @torch.no_grad()
    def _soft_update_targets(self) -> None:
        # Polyak averaging, target <- target + tau * (online - target), as one fused op.
        torch._foreach_lerp_(self._targets, self._onlines, self.config.tau)

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "updates": self.updates,
            "agent_generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_opt.load_state_dict(state["actor_optimizer"])
        self.critic_opt.load_state_dict(state["critic_optimizer"])
        self.updates = int(state["updates"])
        self.generator.set_state(state["agent_generator"].cpu())
