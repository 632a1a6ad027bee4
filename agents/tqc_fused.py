"""TQC's update with hand-written gradients (`update_backend: fused`), for the stock ReLU
MLPs.

The same maths, in the same order and from the same random draws, as
agents/tqc_update.py (the readable reference), computed as agents/sac_fused.py computes
SAC's: the policy's pass on the batch and the next observations at once, the
temperature's step, the critics', the actor's (its gradient through the tanh-squashed
Gaussian is SAC's, `_actor_gradients`), and the target critics' Polyak average in one
kernel, every gradient written straight into the flat Adam buffers. What is TQC's:

- the target: each target critic's quantiles at (s', a'), pooled [B, n Q], the highest
  dropped (TQCAgent.truncated_target, shared with the reference; the kept atoms are
  selected, not sorted, which changes only the order the loss sums them in);
- the critics' loss, mean(weight * huber(delta)) over critics, rows, quantiles and atoms,
  with delta = atom - quantile and weight = |level - 1[delta < 0]|. With
  c = clamp(delta, -1, 1), huber(delta) = c (delta - c / 2) and d huber / d quantile =
  -c, so each quantile's gradient is -sum over atoms of weight * c, over the count of
  terms. `quantile_huber_sum` computes it critic by critic, [B, Q, K] at a time (not
  [n, B, Q, K]), in three buffers the agent keeps;
- the actor's loss on the mean of every critic's quantiles, whose gradient is the same
  constant for each quantile of each critic.

tests/test_tqc_fused.py checks that it agrees with the autograd update. The
diagnostics' probe and reading of the first critic are FusedSACAgent's, on these
losses; acting, saving and loading are TQCAgent's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.agents import fused_ops
from rltrain.agents.base import Batch, CommonSettings
from rltrain.agents.fused_ops import Layer
from rltrain.agents.max_entropy_ops import Squashed
from rltrain.agents.sac_fused import FusedSACAgent
from rltrain.agents.tqc_update import TQCAgent, quantile_levels


def quantile_huber_sum(quantiles: torch.Tensor, target: torch.Tensor, levels: torch.Tensor,
                       work: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The sum over rows, quantiles and atoms of the quantile Huber terms of one critic's
    `quantiles` [B, Q] at `levels` [Q] onto the atoms of `target` [B, K], and its gradient
    with respect to `quantiles` [B, Q] (the module docstring's formulas), computed in
    `work` [3, B, Q, K]."""
    delta, clamped, weighted = work
    torch.sub(target.unsqueeze(1), quantiles.unsqueeze(2), out=delta)
    torch.clamp(delta, -1.0, 1.0, out=clamped)
    # weight * c as level * c + (1 - 2 level) * min(c, 0): level * c above the quantile,
    # (1 - level) * c under it. torch.where between two broadcast levels is several times
    # slower on the CPU.
    levels = levels.unsqueeze(1)  # [Q, 1]
    torch.clamp(clamped, max=0.0, out=weighted).mul_(1.0 - 2.0 * levels)
    weighted.addcmul_(clamped, levels)
    # sum weight * huber = sum weight * c * (delta - c / 2)
    total = torch.dot(weighted.view(-1), delta.sub_(clamped, alpha=0.5).view(-1))
    return total, weighted.sum(dim=2).neg_()  # -sum_k weight * c


class FusedTQCAgent(FusedSACAgent, TQCAgent):
    """`TQCAgent` whose update computes its gradients by hand on flat Adam buffers."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 common: CommonSettings, options: Any, device: torch.device) -> None:
        super().__init__(obs_dim, action_low, action_high, common, options, device)
        self._levels = quantile_levels(options.n_quantiles, torch.empty(0, device=device))
        # The quantile loss's scratch [3, B, Q, K], kept from one update to the next:
        # glibc's malloc gives an allocation of this size back to the OS when it is freed,
        # and every update would fault fresh pages in.
        self._work = torch.empty(0, device=device)
        self._updating = False  # in `update` (not a probe): its scratch is the one kept

    def _critic_gradients(self, batch: Batch, next_sample: Squashed, ent_coef: torch.Tensor,
                          grads: list[list[Layer]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The quantile Huber loss onto the truncated target, with its gradient written
        into `grads` (each member's layers), and the first critic's quantiles [B, Q]."""
        target = self._fused_td_target(batch, next_sample, ent_coef)  # [B, K]
        x = self.critic.inputs(batch.obs, batch.actions)
        count = len(self._critics) * x.shape[0] * self.options.n_quantiles * target.shape[1]
        totals, quantiles_of = [], []
        for layers, member_grads in zip(self._critics, grads, strict=True):
            quantiles, inputs = fused_ops.forward(layers, x, self.products)  # [B, Q]
            total, grad = quantile_huber_sum(quantiles, target, self._levels,
                                             self._work_for(quantiles, target))
            fused_ops.backward(layers, inputs, grad.mul_(1.0 / count), member_grads,
                               self.products)
            totals.append(total)
            quantiles_of.append(quantiles)
        return torch.stack(totals).sum() / count, quantiles_of[0]

    @torch.no_grad()
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self._updating = True
        try:
            return super().update(batch)
        finally:
            self._updating = False

    def _work_for(self, quantiles: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The scratch of this loss's shape: the one kept for the updates, or for a probe
        of another batch size one of its own (the updates' stays)."""
        shape = (3, *quantiles.shape, target.shape[1])  # [3, B, Q, K]
        if self._work.shape == shape:
            return self._work
        work = quantiles.new_empty(shape)
        if self._updating:
            self._work = work
        return work

    def _fused_td_target(self, batch: Batch, next_sample: Squashed,
                         ent_coef: torch.Tensor) -> torch.Tensor:
        next_x = torch.cat([batch.next_obs, next_sample.squashed], dim=-1)
        pooled = torch.cat([fused_ops.forward(member, next_x, self.products)[0]
                            for member in self._targets], dim=1)  # [B, n Q], critic by critic
        return self.truncated_target(batch, pooled, next_sample.log_prob, ent_coef)

    @staticmethod
    def _lowest(pooled: torch.Tensor, kept: int) -> torch.Tensor:
        """The `kept` lowest values of each row of `pooled`, in no particular order: the
        loss sums over them, and a partial selection is several times faster than a sort
        on the CPU."""
        return pooled.topk(kept, dim=1, largest=False, sorted=False).values

    def _actor_loss_through_critics(self, x: torch.Tensor, sample: Squashed,
                                    ent_coef: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss mean(alpha log pi - the mean of every critic's quantiles at x)
        at the critics' input x = [obs, squashed action] [B, in], and its gradient with
        respect to x."""
        rows, n_quantiles = x.shape[0], self.options.n_quantiles
        # Every quantile of every critic enters the loss with the weight -1 / (B n Q).
        grad_quantiles = torch.full((rows, n_quantiles),
                                    -1.0 / (rows * len(self._critics) * n_quantiles),
                                    device=x.device)
        means, grad_x = [], None
        for layers in self._critics:
            quantiles, inputs = fused_ops.forward(layers, x, self.products)  # [B, Q]
            means.append(quantiles.mean(dim=-1, keepdim=True))
            grad = fused_ops.backward(layers, inputs, grad_quantiles, products=self.products)
            grad_x = grad if grad_x is None else grad_x.add_(grad)
        q_pi = torch.stack(means).mean(dim=0)  # [B, 1]
        return (ent_coef * sample.log_prob - q_pi).mean(), grad_x
