"""DDPG with clipped double-Q targets, and TD3 as an option (sections 3.1-3.2 of the source doc).

DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning" (2016).
TD3:  Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods"
      (2018): delayed actor/target updates and target policy smoothing.
The source document's DDPG already uses twin critics and the min of the two targets; with
`algo: ddpg` that is kept, with policy_delay 1 and no target smoothing.

This module is update maths only: `act(obs)`, `update(batch) -> metrics`,
`state_dict()`. It never touches an env, a file or a logger. Metrics come back as
detached tensors on the agent's device so that the hot loop needs no host sync.
Gradients are written out by hand (agents/backprop.py) rather than taken from autograd;
`critic_gradients` and `actor_gradients` are the two losses and their gradients.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np
import torch

from rltrain.agents import backprop
from rltrain.agents.optimiser import Optimised, flatten_parameters
from rltrain.networks.actor import Actor
from rltrain.networks.critic import Critic
from rltrain.utils.config import TrainConfig
from rltrain.utils.replay_buffer import Batch
from rltrain.utils.seeding import AGENT, derive_seed, load_generator_state


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
        # Every network's parameters are views of one flat tensor (the online ones by
        # their optimiser): Polyak averaging is one kernel per network.
        self._targets = [flatten_parameters(self.actor_target),
                         flatten_parameters(self.critic_target)]
        self._onlines = [self.actor_opt.param, self.critic_opt.param]
        self._params = {name: list(getattr(self, name).parameters())
                        for name in ("actor", "critic", "actor_target", "critic_target")}
        with torch.no_grad():
            # Views of the weights and gradient buffers in the layout backprop.py uses, made
            # once: updates, Polyak averaging and load_state_dict all change the tensors in
            # place, so the views stay valid.
            self._actor_views = {name: backprop.as_layers(self._params[name], transposed=True)
                                 for name in ("actor", "actor_target")}
            self._actor_views["actor_grads"] = backprop.as_layers(self.actor_opt.grads,
                                                                  transposed=True)
            self._critic_views = {name: backprop.ensemble_members(self._params[name])
                                  for name in ("critic", "critic_target")}
            self._critic_views["critic_grads"] = backprop.ensemble_members(self.critic_opt.grads)
        self.action_low = torch.as_tensor(action_low, dtype=torch.float32, device=device)
        self.action_high = torch.as_tensor(action_high, dtype=torch.float32, device=device)
        # Own generator for target smoothing noise, seeded from the run's seed (its own
        # stream, see utils/seeding.py); its state is saved in checkpoints.
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(derive_seed(config.seed, AGENT))
        is_td3 = config.algo == "td3"
        self.policy_delay = config.td3.policy_delay if is_td3 else 1
        self.target_noise = config.td3.target_policy_noise if is_td3 else 0.0
        self.target_noise_clip = config.td3.target_noise_clip
        self.updates = 0

    @torch.inference_mode()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action (no exploration noise) for one observation [obs_dim],
        or one per row of [N, obs_dim]."""
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
        if self.updates % self.policy_delay == 0:
            metrics.update(self._actor_step(batch.obs))
            self._soft_update_targets()
        return metrics

    def _td_target(self, batch: Batch, smooth: bool = True) -> torch.Tensor:
        """r + gamma * (1 - terminated) * min_i Q'_i(s', pi'(s')), [B, 1]."""
        with torch.no_grad():
            # Actions are handled normalised to [-1, 1] (the tanh output), which is what
            # the critic takes: a = tanh(.) * scale + bias enters it as (a - bias) / scale.
            next_action, _ = backprop.forward(self._layers("actor_target"), batch.next_obs)
            next_action = next_action.tanh_()
            if smooth and self.target_noise > 0:
                # TD3 target policy smoothing, noise relative to the action half-range.
                noise = torch.randn(next_action.shape, device=self.device,
                                    generator=self.generator)
                noise = (noise * self.target_noise).clamp_(-self.target_noise_clip,
                                                           self.target_noise_clip)
                next_action = next_action.add_(noise).clamp_(-1.0, 1.0)
            x = torch.cat([batch.next_obs, next_action], dim=-1)
            target_q = functools.reduce(torch.minimum, [
                backprop.forward(member, x)[0] for member in self._critics("critic_target")])
            # Bootstrap unless the episode truly terminated: a time-limit truncation is not
            # the end of the task, so its next state still has value (the batch only marks
            # `terminated`; truncated transitions bootstrap like any other).
            return torch.addcmul(batch.rewards, 1.0 - batch.terminated, target_q,
                                 value=self.config.gamma)

    def _layers(self, net: str) -> list[backprop.Layer]:
        """The (weight, bias) layers of "actor", "actor_target" or "actor_grads"."""
        return self._actor_views[net]

    def _critics(self, net: str) -> list[list[backprop.Layer]]:
        """The layers of each twin critic of "critic", "critic_target" or "critic_grads"."""
        return self._critic_views[net]

    def critic_gradients(self, batch: Batch,
                         smooth: bool = True) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Write the gradient of the critic loss (the sum of each critic's MSE to the TD
        target) into the critic's `.grad`; return the loss and each critic's Q [B, 1].
        `smooth=False` leaves out TD3's target noise (and the agent's random stream)."""
        target_q = self._td_target(batch, smooth)
        with torch.no_grad():
            x = self.critic.inputs(batch.obs, batch.actions)  # action normalised, [B, in]
            losses, qs = [], []
            for layers, member_grads in zip(self._critics("critic"), self._critics("critic_grads"),
                                            strict=True):
                q, inputs = backprop.forward(layers, x)
                error = q - target_q  # [B, 1]
                losses.append(error.square().mean())
                backprop.backward(layers, inputs, error.mul_(2.0 / error.shape[0]),
                                  member_grads)
                qs.append(q)
            loss = torch.stack(losses).sum()
        self.critic_opt.attach_grads()
        return loss, qs

    def actor_gradients(self, obs: torch.Tensor) -> torch.Tensor:
        """Write the gradient of the actor loss, -mean Q1(s, pi(s)), into the actor's
        `.grad`; return the loss. The loss reaches the actor through the critic's input
        gradient only: the critic's own weights get no gradient (it would be wasted work)
        and its `.grad` is left as the critic update made it."""
        with torch.no_grad():
            actor_layers = self._layers("actor")
            action, actor_inputs = backprop.forward(actor_layers, obs)
            action = action.tanh_()  # normalised, [B, action_dim]
            q1_layers = self._critics("critic")[0]
            q, critic_inputs = backprop.forward(q1_layers, torch.cat([obs, action], dim=-1))
            loss = -q.mean()
            grad_q = torch.full_like(q, -1.0 / q.shape[0])
            grad_input = backprop.backward(q1_layers, critic_inputs, grad_q)
            grad_action = grad_input[:, obs.shape[1]:]
            grad_pre_tanh = grad_action - grad_action * action.square()  # tanh' = 1 - tanh^2
            backprop.backward(actor_layers, actor_inputs, grad_pre_tanh,
                              self._layers("actor_grads"))
        self.actor_opt.attach_grads()
        return loss

    def _critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        critic_loss, current_q = self.critic_gradients(batch)
        grad_norm = self.critic_opt.step(critic_loss, self.config.grad_clip_norm)
        return {"critic_loss": critic_loss, "q_mean": current_q[0].mean(),
                "critic_grad_norm": grad_norm}

    def _actor_step(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        actor_loss = self.actor_gradients(obs)
        grad_norm = self.actor_opt.step(actor_loss, self.config.grad_clip_norm)
        return {"actor_loss": actor_loss, "actor_grad_norm": grad_norm}

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
            "actor_optimizer": self.actor_opt.state_dict(),
            "critic_optimizer": self.critic_opt.state_dict(),
            "updates": self.updates,
            "agent_generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore everything `state_dict` saved; returns whether the target-noise stream
        continues (False for a checkpoint from the other kind of device)."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_opt.load_state_dict(state["actor_optimizer"])
        self.critic_opt.load_state_dict(state["critic_optimizer"])
        self.updates = int(state["updates"])
        return load_generator_state(self.generator, state["agent_generator"])
