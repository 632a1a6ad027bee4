"""SAC's update with hand-written gradients (`update_backend: fused`), for the stock ReLU MLPs.

The same maths, in the same order and from the same random draws, as agents/sac_update.py
(the readable reference): a policy sample on the batch, the temperature's step, the
critics on the soft TD target, the actor on the stepped critics, the target critics'
Polyak average. What differs is how: the kernels of agents/fused_ops.py write every
gradient straight into the flat buffers of rltrain's Adam (agents/sac_flat.py), with no
autograd graph; the actor's passes on the batch and on the next observations are one
matrix product per layer (its weights do not change between them); the target critics are
one flat buffer, averaged in one kernel. tests/test_sac_fused.py checks that it agrees
with the autograd update. The diagnostics' probe (`hand_probe`) and their reading of
the first critic (`q1`) run on the same kernels; acting, saving and loading are
SACAgent's.

The gradient of the tanh-squashed Gaussian's loss, per action dimension, with
u = mean + std * eps, s = tanh(u), log pi = sum(-eps^2/2 - log std - log(2 pi)/2)
- sum(log(1 - s^2 + 1e-6)), and the actor's loss mean(alpha log pi - min_i Q_i(obs, s)):
  dL/du = (dL/ds + dL/dlog pi * 2 s / (1 - s^2 + 1e-6)) * (1 - s^2)
  dL/dmean = dL/du;  dL/dlog std = dL/du * std * eps - dL/dlog pi  (0 where clamped)
where dL/ds reaches s through the critic whose Q is the lower on that row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.agents import fused_ops
from rltrain.agents.base import Batch, CommonSettings
from rltrain.agents.fused_ops import Layer
from rltrain.agents.gemm import KeepsProducts, Products
from rltrain.agents.probes import Probe, probe_from_gradients
from rltrain.agents.sac_flat import FlatSACAgent
from rltrain.agents.sac_update import PROBE_SEED
from rltrain.networks.gaussian_actor import HALF_LOG_2PI, LOG_STD_MAX, LOG_STD_MIN, TANH_EPS


class _Policy:
    """One pass of the actor on the batch's and the next observations at once, and what
    the actor's backward pass needs of the batch's half."""

    def __init__(self, hidden: list[Layer], heads: list[Layer], batch: Batch,
                 generator: torch.Generator, products: Products,
                 next_first: bool = False) -> None:
        rows = batch.obs.shape[0]
        latent, inputs = fused_ops.forward(hidden, torch.cat([batch.obs, batch.next_obs]),
                                           products, relu_output=True)
        (mu_w, mu_b), (std_w, std_b) = heads
        mean = torch.addmm(mu_b, latent, mu_w)
        raw_log_std = torch.addmm(std_b, latent, std_w)
        log_std = raw_log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        std = log_std.exp()
        # The batch's draw first, then the next observations': the reference update's
        # order (`next_first`: the reference probe's, whose TD target samples first).
        eps = torch.randn(mean[:rows].shape, device=mean.device, generator=generator)
        eps_next = torch.randn(mean[:rows].shape, device=mean.device, generator=generator)
        if next_first:
            eps, eps_next = eps_next, eps
        noise = torch.cat([eps, eps_next])
        squashed = torch.tanh(mean + std * noise)
        log_prob = (-0.5 * noise.square() - log_std - HALF_LOG_2PI).sum(-1, keepdim=True)
        log_prob = log_prob - torch.log1p(-squashed.square() + TANH_EPS).sum(-1, keepdim=True)
        self.squashed, self.next_squashed = squashed[:rows], squashed[rows:]
        self.log_prob, self.next_log_prob = log_prob[:rows], log_prob[rows:]
        # The batch's half of what the backward pass reads (row slices: no copies).
        self.inputs = [x[:rows] for x in inputs]
        self.latent, self.eps, self.std = latent[:rows], eps, std[:rows]
        self.unclamped = ((raw_log_std[:rows] >= LOG_STD_MIN)
                          & (raw_log_std[:rows] <= LOG_STD_MAX))


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
        metrics = self._fused_temperature_step(policy.log_prob)
        metrics.update(self._fused_critic_step(batch, policy, ent_coef))
        metrics.update(self._fused_actor_step(batch.obs, policy, ent_coef))
        metrics["ent_coef"] = ent_coef[0]
        metrics["entropy"] = -policy.log_prob.mean()
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
        critic_loss, q1 = self._critic_gradients(batch, policy, ent_coef,
                                                 fused_ops.ensemble_members(critic_grads))
        actor_grads = self.actor_opt.scratch_grads()
        layers = fused_ops.as_layers(actor_grads, transposed=True)
        actor_loss = self._actor_gradients(batch.obs, policy, ent_coef, layers[:-2],
                                           layers[-2:])
        return probe_from_gradients(self.critic, critic_grads, self.actor, actor_grads,
                                    (critic_loss, actor_loss), q1.mean())

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic's Q [B, 1] through this update's kernels: the mean of its
        outputs (one, or a quantile critic's quantiles). Outside autograd; with
        gradients on, the module's."""
        if torch.is_grad_enabled():
            return super().q1(obs, action)
        outputs = fused_ops.forward(self._critics[0], self.critic.inputs(obs, action),
                                    self.products)[0]
        return outputs.mean(dim=-1, keepdim=True)

    def _fused_temperature_step(self, log_prob: torch.Tensor) -> dict[str, torch.Tensor]:
        if not self.temperature.learnt:
            return {}
        shortfall = log_prob + self.target_entropy
        loss = -(self.log_ent_coef * shortfall).mean()
        optimiser = self.ent_coef_opt
        torch.mean(shortfall, dim=0, out=optimiser.grad).neg_()  # dLoss/dlog(alpha)
        optimiser.attach_grads()
        optimiser.step(loss, None)
        return {"ent_coef_loss": loss}

    def _fused_critic_step(self, batch: Batch, policy: _Policy,
                           ent_coef: torch.Tensor) -> dict[str, torch.Tensor]:
        loss, q1 = self._critic_gradients(batch, policy, ent_coef, self._critic_grads)
        self.critic_opt.attach_grads()
        grad_norm = self.critic_opt.step(loss, self.settings.grad_clip_norm)
        return {"critic_loss": loss, "q_mean": q1.mean(), "critic_grad_norm": grad_norm}

    def _critic_gradients(self, batch: Batch, policy: _Policy, ent_coef: torch.Tensor,
                          grads: list[list[Layer]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Half the sum of the critics' MSE to the soft TD target, with its gradient
        written into `grads` (each member's layers), and the first critic's Q [B, 1]
        (the metrics' `q_mean` is its mean)."""
        next_x = torch.cat([batch.next_obs, policy.next_squashed], dim=-1)
        target_q = torch.minimum(*(fused_ops.forward(member, next_x, self.products)[0]
                                   for member in self._targets))
        soft_q = target_q - ent_coef * policy.next_log_prob
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
        self.actor_opt.attach_grads()
        grad_norm = self.actor_opt.step(loss, self.settings.grad_clip_norm)
        return {"actor_loss": loss, "actor_grad_norm": grad_norm}

    def _actor_gradients(self, obs: torch.Tensor, policy: _Policy, ent_coef: torch.Tensor,
                         hidden_grads: list[Layer], head_grads: list[Layer]) -> torch.Tensor:
        """The actor's loss, with its gradient written into `hidden_grads` and
        `head_grads` (the hidden stack's layers; the mean's and log std's heads)."""
        x = torch.cat([obs, policy.squashed], dim=-1)
        loss, grad_x = self._actor_loss_through_critics(x, policy, ent_coef)
        grad_s = grad_x[:, obs.shape[1]:]  # the critic takes s itself (normalised units)
        self._policy_backward(policy, grad_s, ent_coef, hidden_grads, head_grads)
        return loss

    def _actor_loss_through_critics(self, x: torch.Tensor, policy: _Policy,
                                    ent_coef: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss mean(alpha log pi - min_i Q_i(x)) at the critics' input
        x = [obs, squashed action] [B, in], and its gradient with respect to x."""
        rows = x.shape[0]
        passes = [fused_ops.forward(member, x, self.products) for member in self._critics]
        (q1, inputs1), (q2, inputs2) = passes
        loss = (ent_coef * policy.log_prob - torch.minimum(q1, q2)).mean()
        # The minimum's gradient goes to the lower critic (the first where they tie).
        second = q2 < q1
        grad_q1 = torch.where(second, 0.0, -1.0 / rows)
        grad_q2 = torch.where(second, -1.0 / rows, 0.0)
        grad_x = fused_ops.backward(self._critics[0], inputs1, grad_q1, products=self.products)
        grad_x += fused_ops.backward(self._critics[1], inputs2, grad_q2, products=self.products)
        return loss, grad_x

    def _policy_backward(self, policy: _Policy, grad_s: torch.Tensor, ent_coef: torch.Tensor,
                         hidden_grads: list[Layer], head_grads: list[Layer]) -> None:
        """Write the actor's gradient into `hidden_grads` and `head_grads` (the hidden
        stack's layers; the mean's and log std's heads), from dLoss/ds [B, A]
        (what reaches the squashed action through the critics) and the loss's
        alpha log pi term (the module docstring's formulas)."""
        rows = grad_s.shape[0]
        s = policy.squashed
        grad_log_prob = ent_coef / rows
        # 1 + (-s^2 + 1e-6) as the reference's log1p computes it: near |s| = 1 it is not
        # the same float as (1 - s^2) + 1e-6.
        log1p_input = -s.square() + TANH_EPS
        grad_u = (grad_s + grad_log_prob * 2.0 * s / (log1p_input + 1.0)) * (1.0 - s.square())
        grad_log_std = torch.where(policy.unclamped,
                                   grad_u * policy.std * policy.eps - grad_log_prob, 0.0)
        (mu_w, _), (std_w, _) = self._heads
        for grad, (weight_grad, bias_grad) in zip((grad_u, grad_log_std), head_grads,
                                                  strict=True):
            torch.mm(policy.latent.t(), grad, out=weight_grad)
            torch.sum(grad, dim=0, out=bias_grad)
        grad_latent = torch.addmm(torch.mm(grad_u, mu_w.t()), grad_log_std, std_w.t())
        grad_hidden = fused_ops.relu_backward(grad_latent, policy.latent)
        fused_ops.backward(self._hidden, policy.inputs, grad_hidden, hidden_grads, self.products)
