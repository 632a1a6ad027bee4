"""The accelerated update backend: DDPGAgent's update, with hand-written gradients.

The same maths as agents/deterministic.py (TD target, critic and actor losses, Adam, Polyak
averaging) for the stock ReLU MLPs, computed with the kernels of agents/fused_ops.py:
gradients written straight into flat buffers, each network's Adam step and Polyak
average one kernel. `update_backend: auto` takes it on the CPU for the stock networks;
tests/test_backends.py checks that it agrees with the autograd update. The diagnostics'
probe (`hand_probe`) and their reading of the first critic (`q1`) run on the same
kernels; acting, saving and loading are DDPGAgent's.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from rltrain.agents import fused_ops
from rltrain.agents.deterministic import Batch, DDPGAgent, DDPGSettings
from rltrain.agents.fused_ops import FlatAdamOptimisers, Layer
from rltrain.agents.gemm import KeepsProducts
from rltrain.agents.probes import Probe, probe_from_gradients


class FusedDDPGAgent(KeepsProducts, FlatAdamOptimisers, DDPGAgent):
    """DDPGAgent whose update runs on flat buffers and hand-written backward passes."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 settings: DDPGSettings, device: torch.device) -> None:
        fused_ops.check_fusable(settings.actor_net, settings.critic_net)
        super().__init__(obs_dim, action_low, action_high, settings, device)
        self._choose_products(settings.matmul_kernel, (*settings.actor_net.hidden_sizes,
                                                       *settings.critic_net.hidden_sizes))
        # Every network's parameters are views of one flat tensor (the online ones by
        # their optimiser): Polyak averaging is one kernel per network.
        self._targets = [fused_ops.flatten_parameters(self.actor_target),
                         fused_ops.flatten_parameters(self.critic_target)]
        self._onlines = [self.actor_opt.param, self.critic_opt.param]
        params = {name: list(getattr(self, name).parameters())
                  for name in ("actor", "critic", "actor_target", "critic_target")}
        with torch.no_grad():
            # Views of the weights and gradient buffers in the kernels' layout, made once:
            # updates, Polyak averaging and load_state_dict change the tensors in place.
            self._actor_views = {name: fused_ops.as_layers(params[name], transposed=True)
                                 for name in ("actor", "actor_target")}
            self._actor_views["actor_grads"] = fused_ops.as_layers(self.actor_opt.grads,
                                                                   transposed=True)
            self._critic_views = {name: fused_ops.ensemble_members(params[name])
                                  for name in ("critic", "critic_target")}
            self._critic_views["critic_grads"] = fused_ops.ensemble_members(
                self.critic_opt.grads)

    @torch.no_grad()
    def td_target(self, batch: Batch, smooth: bool = True) -> torch.Tensor:
        # Actions are handled normalised to [-1, 1] (the tanh output), which is what the
        # critic takes: a = tanh(.) * scale + bias enters it as (a - bias) / scale.
        s = self.settings
        next_action, _ = fused_ops.forward(self._actor_views["actor_target"], batch.next_obs,
                                           self.products)
        next_action = next_action.tanh_()
        if smooth and s.target_noise > 0:
            noise = torch.randn(next_action.shape, device=self.device, generator=self.generator)
            noise = (noise * s.target_noise).clamp_(-s.target_noise_clip, s.target_noise_clip)
            next_action = next_action.add_(noise).clamp_(-1.0, 1.0)
        x = torch.cat([batch.next_obs, next_action], dim=-1)
        target_q = functools.reduce(torch.minimum, [
            fused_ops.forward(member, x, self.products)[0]
            for member in self._critic_views["critic_target"]])
        return torch.addcmul(batch.rewards, 1.0 - batch.terminated, target_q, value=s.gamma)

    def _critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        loss, q1 = self._critic_gradients(batch, self.td_target(batch),
                                          self._critic_views["critic_grads"])
        grad_norm = self.critic_opt.step(loss, self.settings.grad_clip_norm)
        return {"critic_loss": loss, "q_mean": q1.mean(), "critic_grad_norm": grad_norm}

    @torch.no_grad()
    def _critic_gradients(self, batch: Batch, target_q: torch.Tensor,
                          grads: list[list[Layer]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The sum of the critics' MSE to `target_q`, with its gradient written into
        `grads` (each member's layers), and the first critic's Q [B, 1]."""
        x = self.critic.inputs(batch.obs, batch.actions)  # action normalised, [B, in]
        losses, qs = [], []
        for layers, member_grads in zip(self._critic_views["critic"], grads, strict=True):
            q, inputs = fused_ops.forward(layers, x, self.products)
            error = q - target_q  # [B, 1]
            losses.append(error.square().mean())
            # d(mean error^2)/dq = 2 error / B
            fused_ops.backward(layers, inputs, error.mul_(2.0 / error.shape[0]),
                               member_grads, self.products)
            qs.append(q)
        return torch.stack(losses).sum(), qs[0]

    def _actor_step(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        loss = self._actor_gradients(obs, self._actor_views["actor_grads"])
        grad_norm = self.actor_opt.step(loss, self.settings.grad_clip_norm)
        return {"actor_loss": loss, "actor_grad_norm": grad_norm}

    @torch.no_grad()
    def _actor_gradients(self, obs: torch.Tensor, grads: list[Layer]) -> torch.Tensor:
        """-mean Q1(s, pi(s)), with its gradient written into `grads` (the actor's
        layers). The loss reaches the actor through the critic's input gradient only:
        the critic's weights get none, its `.grad` stays as it was."""
        actor_layers: list[Layer] = self._actor_views["actor"]
        action, actor_inputs = fused_ops.forward(actor_layers, obs, self.products)
        action = action.tanh_()  # normalised, [B, action_dim]
        q1_layers = self._critic_views["critic"][0]
        q, critic_inputs = fused_ops.forward(q1_layers, torch.cat([obs, action], dim=-1),
                                             self.products)
        loss = -q.mean()
        grad_q = torch.full_like(q, -1.0 / q.shape[0])
        grad_input = fused_ops.backward(q1_layers, critic_inputs, grad_q,
                                        products=self.products)
        grad_action = grad_input[:, obs.shape[1]:]
        grad_pre_tanh = grad_action - grad_action * action.square()  # tanh' = 1 - tanh^2
        fused_ops.backward(actor_layers, actor_inputs, grad_pre_tanh, grads, self.products)
        return loss

    @torch.no_grad()
    def hand_probe(self, batch: Batch) -> Probe:
        """agents/probes.py's probe with this update's kernels: the losses of
        `DDPGAgent.probe_losses` (no target smoothing noise) and their gradients,
        written into scratch buffers."""
        critic_grads = self.critic_opt.scratch_grads()
        critic_loss, q1 = self._critic_gradients(batch, self.td_target(batch, smooth=False),
                                                 fused_ops.ensemble_members(critic_grads))
        actor_grads = self.actor_opt.scratch_grads()
        actor_loss = self._actor_gradients(batch.obs,
                                           fused_ops.as_layers(actor_grads, transposed=True))
        return probe_from_gradients(self.critic, critic_grads, self.actor, actor_grads,
                                    (critic_loss, actor_loss), q1.mean())

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return fused_ops.first_critic_q(self.critic, self._critic_views["critic"][0], obs,
                                        action, self.products)

    @torch.no_grad()
    def _soft_update_targets(self) -> None:
        # Polyak averaging, one kernel per network on the flat buffers.
        for target, online in zip(self._targets, self._onlines, strict=True):
            target.lerp_(online, self.settings.tau)
