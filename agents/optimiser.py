"""Adam (Kingma & Ba, 2015) for one network: its parameters, one flat gradient buffer,
and the moments, stepped by PyTorch's fused Adam kernel.

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


class Optimised:
    """A network's parameters, one flat gradient buffer for them, and their Adam state.

    The update writes gradients straight into the buffer (agents/backprop.py), through
    views that are also the parameters' `.grad`, so diagnostics read them as usual. One
    buffer makes the gradient norm and clipping one kernel each. The fused kernel (one
    call per step, 2.5x faster than foreach on a 2-core CPU here) honours `found_inf`,
    used to skip non-finite steps without a host sync.
    """

    def __init__(self, net: nn.Module, lr: float, device: torch.device) -> None:
        assert device.type in ("cpu", "cuda"), f"unsupported device {device}"
        self.lr = lr
        self.params = list(net.parameters())
        sizes = [p.numel() for p in self.params]
        self.grad = torch.zeros(sum(sizes), device=device)
        self.grads = [g.view_as(p) for g, p in zip(self.grad.split(sizes), self.params,
                                                   strict=True)]
        self.attach_grads()
        with torch.no_grad():
            self.exp_avgs = [torch.zeros_like(p) for p in self.params]
            self.exp_avg_sqs = [torch.zeros_like(p) for p in self.params]
            # One step count per parameter, a float32 tensor, as torch's fused Adam keeps it.
            self.steps = [torch.zeros((), device=device) for _ in self.params]

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
        found_inf = (~torch.isfinite(loss + norm)).float()
        torch._foreach_add_(self.steps, 1)
        torch._fused_adam_(self.params, self.grads, self.exp_avgs, self.exp_avg_sqs, [],
                           self.steps, amsgrad=False, lr=self.lr, beta1=BETAS[0],
                           beta2=BETAS[1], weight_decay=0.0, eps=EPS, maximize=False,
                           grad_scale=None, found_inf=found_inf)
        torch._foreach_sub_(self.steps, [found_inf] * len(self.steps))
        return norm

    def state_dict(self) -> dict[str, Any]:
        """The moments and step counts in `torch.optim.Adam.state_dict()`'s layout."""
        state = {index: {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
                 for index, (step, exp_avg, exp_avg_sq) in enumerate(
                     zip(self.steps, self.exp_avgs, self.exp_avg_sqs, strict=True))}
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
            for tensor in (*self.steps, *self.exp_avgs, *self.exp_avg_sqs):
                tensor.zero_()
            return
        tensors = zip(self.steps, self.exp_avgs, self.exp_avg_sqs, strict=True)
        for index, (step, exp_avg, exp_avg_sq) in enumerate(tensors):
            entry = state[index]
            if entry["exp_avg"].shape != exp_avg.shape:
                raise ValueError(f"optimiser state {index} has shape "
                                 f"{tuple(entry['exp_avg'].shape)}, its parameter "
                                 f"{tuple(exp_avg.shape)}")
            step.copy_(entry["step"].reshape(()))
            exp_avg.copy_(entry["exp_avg"])
            exp_avg_sq.copy_(entry["exp_avg_sq"])
