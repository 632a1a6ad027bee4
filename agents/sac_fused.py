"""SAC's update with hand-written gradients (`update_backend: fused`), for the stock ReLU MLPs.

The same maths, in the same order and from the same random draws, as agents/sac_update.py
(the readable reference): a policy sample on the batch, the temperature's step, the
critics on the soft TD target, the actor on the stepped critics, the target critics'
Polyak average. What differs is how: the kernels of agents/fused_ops.py write every
gradient straight into the flat buffers of rltrain's Adam (agents/sac_flat.py), with no
autograd graph; the actor's passes on the batch and on the next observations are one
matrix product per layer (its weights do not change between them); the target critics are
one flat buffer, averaged in one kernel. tests/test_sac_fused.py checks that it agrees
with the autograd update. The policy's sample, the actor loss's gradient through it and
the temperature's step are agents/max_entropy_ops.py's (CrossQ's fused update shares
them). The diagnostics' probe (`hand_probe`) and their reading of the first critic
(`q1`) run on the same kernels; acting, saving and loading are SACAgent's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.agents import fused_ops, max_entropy_ops
from rltrain.agents.base import Batch, CommonSettings
from rltrain.agents.fused_ops import Layer
from rltrain.agents.gemm import KeepsProducts, Products
from rltrain.agents.probes import Probe, probe_from_gradients
from rltrain.agents.sac_flat import FlatSACAgent
from rltrain.agents.sac_update import PROBE_SEED


class _Policy:
    """One pass of the actor on the batch's and the next observations at once, and what
    the actor's backward pass needs of the batch's half."""

    def __init__(self, hidden: list[Layer], heads: list[Layer], batch: Batch,
                 generator: torch.Generator, products: Products,
                 next_first: bool = False) -> None:
        rows = batch.obs.shape[0]
        latent, inputs = fused_ops.forward(hidden, torch.cat([batch.obs, batch.next_obs]),
                                           products, relu_output=True)
        mean, raw_log_std = max_entropy_ops.heads_forward(heads, latent)
        # The batch's draw first, then the next observations': the reference update's
        # order (`next_first`: the reference probe's, whose TD target samples first).
        eps = torch.randn(mean[:rows].shape, device=mean.device, generator=generator)
        eps_next = torch.randn(mean[:rows].shape, device=mean.device, generator=generator)
        if next_first:
            eps, eps_next = eps_next, eps
        sample = max_entropy_ops.squash(mean, raw_log_std, torch.cat([eps, eps_next]))
        # The batch's half and the next observations' (row slices: no copies).
        self.sample, self.next_sample = sample.split(rows)
        # The batch's half of what the backward pass reads of the hidden stack.
        self.inputs = [x[:rows] for x in inputs]
        self.latent = latent[:rows]


class FusedSACAgent(KeepsProducts, FlatSACAgent):
    """`FlatSACAgent` whose update computes its gradients by hand."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 common: CommonSettings, options: Any, device: torch.device) -> None:
        fused_ops.check_fusable(common.actor_net, common.critic_net)
        super().__init__(obs_dim, action_low, action_high, common, options, device)
        self._choose_products(common.matmul_kernel,
                              (*common.actor_net.hidden_sizes, *common.critic_net.hidden_sizes))
        # The online networks' parameters are views of their optimisers' flat buffers
        # (FlatAdam); the target critics' of one of their own.
        self._target = fused_ops.flatten_parameters(self.critic_target)
        with torch.no_grad():
            # Views in the kernels' layout, made once: updates, Polyak averaging and
            # load_state_dict change the tensors in place.
            actor = fused_ops.as_layers(list(self.actor.parameters()), transposed=True)
            actor_grads = fused_ops.as_layers(self.actor_opt.grads, transposed=True)
            self._hidden, self._heads = actor[:-2], actor[-2:]  # [..., mu, log_std]
            self._hidden_grads, self._head_grads = actor_grads[:-2], actor_grads[-2:]
            self._critics = fused_ops.ensemble_members(list(self.critic.parameters()))
            self._critic_grads = fused_ops.ensemble_members(self.critic_opt.grads)
            self._targets = fused_ops.ensemble_members(list(self.critic_target.parameters()))

    @torch.no_grad()
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.updates += 1
        policy = _Policy(self._hidden, self._heads, batch, self.generator, self.products)
        ent_coef = self.log_ent_coef.detach().exp()  # this update's: before its own step
        metrics = max_entropy_ops.temperature_step(self, policy.sample.log_prob)
        metrics.update(self._fused_critic_step(batch, policy.next_sample, ent_coef))
        metrics.update(self._fused_actor_step(batch.obs, policy, ent_coef))
        metrics["ent_coef"] = ent_coef[0]
        metrics["entropy"] = -policy.sample.log_prob.mean()
        if self.updates % self.options.target_update_interval == 0:
            self._target.lerp_(self.critic_opt.param, self.settings.tau)
        return metrics

    @torch.no_grad()
    def hand_probe(self, batch: Batch) -> Probe:
        """agents/probes.py's probe with this update's kernels: the losses of
        `SACAgent.probe_losses` (the policy sampled from the probe's own stream, in its
        order) and their gradients, written into scratch buffers."""
        generator = torch.Generator(device=self.device).manual_seed(PROBE_SEED)
        policy = _Policy(self._hidden, self._heads, batch, generator, self.products,
                         next_first=True)
        ent_coef = self.log_ent_coef.detach().exp()
        critic_grads = self.critic_opt.scratch_grads()
        critic_loss, q1 = self._critic_gradients(batch, policy.next_sample, ent_coef,
                                                 fused_ops.ensemble_members(critic_grads))
        actor_grads = self.actor_opt.scratch_grads()
        layers = fused_ops.as_layers(actor_grads, transposed=True)
        actor_loss = self._actor_gradients(batch.obs, policy, ent_coef, layers[:-2],
                                           layers[-2:])
        return probe_from_gradients(self.critic, critic_grads, self.actor, actor_grads,
                                    (critic_loss, actor_loss), q1.mean())

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return fused_ops.first_critic_q(self.critic, self._critics[0], obs, action,
                                        self.products)

    def _fused_critic_step(self, batch: Batch, next_sample: max_entropy_ops.Squashed,
                           ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        loss, q1 = self._critic_gradients(batch, next_sample, ent_coef, self._critic_grads)
        grad_norm = self.critic_opt.step(loss, self.settings.grad_clip_norm)
        return {"critic_loss": loss, "q_mean": q1.mean(), "critic_grad_norm": grad_norm}

    def _critic_gradients(self, batch: Batch, next_sample: max_entropy_ops.Squashed,
                          ent_coef: torch.Tensor, grads: list[list[Layer]]
                          ) -> tuple[torch.Tensor, torch.Tensor]:
        """Half the sum of the critics' MSE to the soft TD target, with its gradient
        written into `grads` (each member's layers), and the first critic's Q [B, 1]
        (the metrics' `q_mean` is its mean)."""
        next_x = torch.cat([batch.next_obs, next_sample.squashed], dim=-1)
        target_q = torch.minimum(*(fused_ops.forward(member, next_x, self.products)[0]
                                   for member in self._targets))
        soft_q = target_q - ent_coef * next_sample.log_prob
        target = batch.rewards + self.settings.gamma * (1.0 - batch.terminated) * soft_q
        x = self.critic.inputs(batch.obs, batch.actions)
        losses, qs = [], []
        for layers, member_grads in zip(self._critics, grads, strict=True):
            q, inputs = fused_ops.forward(layers, x, self.products)
            error = q - target
            losses.append(error.square().mean())
            # d(0.5 mean error^2)/dq = error / B
            fused_ops.backward(layers, inputs, error.mul_(1.0 / error.shape[0]), member_grads,
                               self.products)
            qs.append(q)
        return 0.5 * torch.stack(losses).sum(), qs[0]

    def _fused_actor_step(self, obs: torch.Tensor, policy: _Policy,
                          ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        loss = self._actor_gradients(obs, policy, ent_coef, self._hidden_grads,
                                     self._head_grads)
        grad_norm = self.actor_opt.step(loss, self.settings.grad_clip_norm)
        return {"actor_loss": loss, "actor_grad_norm": grad_norm}

    def _actor_gradients(self, obs: torch.Tensor, policy: _Policy, ent_coef: torch.Tensor,
                         hidden_grads: list[Layer], head_grads: list[Layer]) -> torch.Tensor:
        """The actor's loss, with its gradient written into `hidden_grads` and
        `head_grads` (the hidden stack's layers; the mean's and log std's heads): what
        reaches the squashed action through the critics (`_actor_loss_through_critics`)
        and the loss's alpha log pi term, back through the policy."""
        sample = policy.sample
        x = torch.cat([obs, sample.squashed], dim=-1)
        loss, grad_x = self._actor_loss_through_critics(x, sample, ent_coef)
        grad_latent = max_entropy_ops.actor_latent_gradient(
            sample, grad_x, obs.shape[1], ent_coef, self._heads, head_grads, policy.latent)
        grad_hidden = fused_ops.relu_backward(grad_latent, policy.latent)
        fused_ops.backward(self._hidden, policy.inputs, grad_hidden, hidden_grads, self.products)
        return loss

    def _actor_loss_through_critics(self, x: torch.Tensor, sample: max_entropy_ops.Squashed,
                                    ent_coef: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss mean(alpha log pi - min_i Q_i(x)) at the critics' input
        x = [obs, squashed action] [B, in], and its gradient with respect to x."""
        passes = [fused_ops.forward(member, x, self.products) for member in self._critics]
        (q1, inputs1), (q2, inputs2) = passes
        loss = (ent_coef * sample.log_prob - torch.minimum(q1, q2)).mean()
        grad_q1, grad_q2 = max_entropy_ops.lower_critic_gradients(q1, q2)
        grad_x = fused_ops.backward(self._critics[0], inputs1, grad_q1, products=self.products)
        grad_x += fused_ops.backward(self._critics[1], inputs2, grad_q2, products=self.products)
        return loss, grad_x
