"""Adam (Kingma & Ba, 2015) for one network: its parameters, gradients and moments each
in one flat buffer, stepped by PyTorch's fused Adam kernel.

Why not `torch.optim.Adam`: constructing any `torch.optim` optimiser imports
`torch._dynamo` (and with it SymPy and torch.distributed): 71 MiB of resident memory
and about a second, for a training process that never compiles anything. The step
itself is the same kernel `torch.optim.Adam(fused=True)` calls (`torch._fused_adam_`),
on the same state, so results are bit-identical to it (tests/test_optimiser.py), and
`state_dict()` has torch's layout, so checkpoints load either way.

The learning rate comes from the config, never from a checkpoint: `rltrain resume --set
critic_lr=...` takes effect (torch's `load_state_dict` would restore the saved one).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

BETAS = (0.9, 0.999)
EPS = 1e-8

# Sets its `found_inf` argument to 1.0 where any of its tensors holds a NaN or inf (and
# multiplies them by `inv_scale`, 1.0 here): GradScaler's check, one small kernel, where
# `~torch.isfinite(x).float()` dispatches five ops (18 against 4 us per call here).
_check_finite = torch._amp_foreach_non_finite_check_and_unscale_


def flatten_parameters(net: nn.Module) -> torch.Tensor:
    """Move `net`'s parameters into one flat tensor, each parameter becoming a view of
    its slice (values unchanged), and return it: an elementwise update of every
    parameter (an Adam step, Polyak averaging) is then one kernel instead of one per
    tensor. In-place changes (optimiser steps, `load_state_dict`) keep the views; do it
    after the network is on its device, since `.to()` would copy them apart."""
    params = list(net.parameters())
    with torch.no_grad():
        flat = torch.cat([p.reshape(-1) for p in params])
        for p, view in zip(params, flat.split([p.numel() for p in params]), strict=True):
            p.data = view.view_as(p)
    return flat


class Optimised:
    """A network's parameters, and their gradients and Adam moments, each in one flat
    buffer that the parameter-shaped views share.

    The update writes gradients straight into the gradient buffer (agents/backprop.py),
    through views that are also the parameters' `.grad`, so diagnostics read them as
    usual. Flat buffers make the gradient norm, clipping and the Adam step one kernel
    each (the fused kernel: 2.5x faster than foreach on a 2-core CPU here, and a third
    faster again on one tensor than on a network's six). It honours `found_inf`, used to
    skip non-finite steps without a host sync.
    """

    def __init__(self, net: nn.Module, lr: float, device: torch.device) -> None:
        assert device.type in ("cpu", "cuda"), f"unsupported device {device}"
        self.lr = lr
        self.params = list(net.parameters())
        self.param = flatten_parameters(net)
        self.grad = torch.zeros_like(self.param)
        self.grads = self._views(self.grad)
        self.attach_grads()
        self.exp_avg = torch.zeros_like(self.param)
        self.exp_avg_sq = torch.zeros_like(self.param)
        # One step count for all parameters (they always step together), a float32
        # tensor as torch's fused Adam keeps it; state_dict() gives each its own copy.
        self.step_count = torch.zeros((), device=device)
        self._found_inf = torch.zeros((), device=device)
        self._one = torch.ones((), device=device)

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """`flat`'s slices shaped like the parameters, in their order."""
        sizes = [p.numel() for p in self.params]
        return [v.view_as(p) for v, p in zip(flat.split(sizes), self.params, strict=True)]

    def attach_grads(self) -> None:
        """Make the buffer's views the parameters' `.grad` again (a probe or a user may
        have replaced them)."""
        for p, g in zip(self.params, self.grads, strict=True):
            if p.grad is not g:
                p.grad = g

    def step(self, loss: torch.Tensor, clip_norm: float | None) -> torch.Tensor:
        """Clip the gradient in the buffer if configured and take an Adam step; return the
        gradient norm before clipping.

        If the loss or the gradient is NaN/inf, the step leaves parameters, moments and
        the step count untouched: the fused kernel skips the update where `found_inf` is
        1 (the flag GradScaler sets for mixed precision), and the step count is taken back.
        So the agent never learns from a NaN, and no host sync is needed to decide it.
        """
        norm = torch.linalg.vector_norm(self.grad)
        if clip_norm is not None:
            # Same rule as clip_grad_norm_: scale by clip / (norm + 1e-6) when above clip.
            self.grad.mul_(torch.clamp(clip_norm / (norm + 1e-6), max=1.0))
        found_inf = self._found_inf.zero_()
        _check_finite([loss.detach(), norm], found_inf, self._one)
        self.step_count.add_(1)
        torch._fused_adam_([self.param], [self.grad], [self.exp_avg], [self.exp_avg_sq], [],
                           [self.step_count], amsgrad=False, lr=self.lr, beta1=BETAS[0],
                           beta2=BETAS[1], weight_decay=0.0, eps=EPS, maximize=False,
                           grad_scale=None, found_inf=found_inf)
        self.step_count.sub_(found_inf)
        return norm

    def state_dict(self) -> dict[str, Any]:
        """The moments and step counts in `torch.optim.Adam.state_dict()`'s layout."""
        state = {index: {"step": self.step_count.clone(), "exp_avg": exp_avg,
                         "exp_avg_sq": exp_avg_sq}
                 for index, (exp_avg, exp_avg_sq) in enumerate(
                     zip(self._views(self.exp_avg), self._views(self.exp_avg_sq), strict=True))}
        group = {"lr": self.lr, "betas": BETAS, "eps": EPS, "weight_decay": 0.0,
                 "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                 "differentiable": False, "fused": True, "decoupled_weight_decay": False,
                 "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    @torch.no_grad()
    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Copy saved moments and step counts in (torch's layout; a state saved before the
        first step is empty). The saved learning rate is ignored: the config's applies."""
        state = saved["state"]
        if not state:  # saved before the first step
            for tensor in (self.step_count, self.exp_avg, self.exp_avg_sq):
                tensor.zero_()
            return
        steps = {float(state[index]["step"]) for index in range(len(self.params))}
        if len(steps) != 1:
            raise ValueError(f"optimiser state has different step counts per parameter "
                             f"({sorted(steps)}); rltrain steps all parameters together")
        views = zip(self._views(self.exp_avg), self._views(self.exp_avg_sq), strict=True)
        for index, (exp_avg, exp_avg_sq) in enumerate(views):
            entry = state[index]
            if entry["exp_avg"].shape != exp_avg.shape:
                raise ValueError(f"optimiser state {index} has shape "
                                 f"{tuple(entry['exp_avg'].shape)}, its parameter "
                                 f"{tuple(exp_avg.shape)}")
            exp_avg.copy_(entry["exp_avg"])
            exp_avg_sq.copy_(entry["exp_avg_sq"])
        self.step_count.fill_(steps.pop())
