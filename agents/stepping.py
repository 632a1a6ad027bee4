"""What both autograd updates (agents/deterministic.py, agents/sac_update.py) do the same
way: one optimiser step with its gradient norm, clipping and NaN guard; restoring an
optimiser with the config's learning rate; restoring a random stream.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import nn


def adam_step(optimiser: Any, net: nn.Module, loss: torch.Tensor,
              clip: float | None) -> torch.Tensor:
    """Backpropagate `loss`, clip `net`'s gradient to `clip` if given and take the
    optimiser's step; return the gradient norm before clipping. A NaN/inf loss or
    gradient leaves parameters, moments and the step count untouched, decided on the
    device (no host sync)."""
    optimiser.zero_grad()
    loss.backward()
    params = list(net.parameters())
    norm = (torch.nn.utils.clip_grad_norm_(params, clip) if clip is not None
            else torch.nn.utils.get_total_norm([p.grad for p in params]))
    # Fused Adam skips its step where `found_inf` is 1 (the flag torch's GradScaler sets
    # for mixed precision), so the agent never learns from a NaN.
    optimiser.found_inf = (~(torch.isfinite(loss) & torch.isfinite(norm))).float()
    optimiser.step()
    return norm.detach()


def load_optimiser(optimiser: Any, saved: dict[str, Any], lr: float) -> None:
    """A torch optimiser's saved state, with the config's rate rather than the saved one."""
    optimiser.load_state_dict(saved)
    for group in optimiser.param_groups:
        group["lr"] = lr


def load_generator(generator: torch.Generator, saved: torch.Tensor) -> bool:
    """Restore a random stream; whether it continues. CPU and CUDA generators keep states
    of different sizes: one from the other kind of device seeds a new stream from its
    hash (the same on every resume)."""
    saved = saved.cpu()
    if saved.numel() == generator.get_state().numel():
        generator.set_state(saved)
        return True
    digest = hashlib.sha256(saved.numpy().tobytes()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little"))
    return False
