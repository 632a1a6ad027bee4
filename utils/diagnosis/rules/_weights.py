"""What the training set-up rules measure on the agent's weights, shared by them.

Update-to-weight ratio: ||w_after - w_before|| / ||w_before|| over one update, for one
network's parameters as a whole. With Adam every parameter moves by about the learning
rate per update whatever its gradient's scale, so the ratio follows the learning rate:
healthy Pendulum runs (lr 3e-4) measure 1e-4..5e-4 per update; orders of magnitude above
that rewrite the weights each update, orders below leave them where they started.
The snapshots are flat copies taken on the device (no host transfer until a ratio is
read, every N updates).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rules package is imported with the config: no torch at import
    import torch
    from torch import nn

USUAL_LR = (1e-4, 1e-3)  # the usual Adam learning rates of DDPG/TD3 actors and critics
USUAL_TAU = (1e-3, 0.05)  # the usual soft target update rates


def flat(module: nn.Module) -> torch.Tensor:
    """The module's parameters as one detached flat copy (no host transfer)."""
    import torch

    with torch.no_grad():
        return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).clone()


def relative_change(before: torch.Tensor, after: torch.Tensor) -> float:
    """||after - before|| / ||before|| (one host transfer)."""
    import torch

    with torch.no_grad():
        norm = float(before.norm())
        return float((after - before).norm()) / norm if norm > 0 else math.inf


def orders_of_magnitude(value: float, usual: tuple[float, float]) -> float:
    """How many powers of ten `value` lies above the usual range (negative: below it;
    0 inside it)."""
    low, high = usual
    if value > high:
        return math.log10(value / high)
    if value < low:
        return -math.log10(low / value)
    return 0.0


def toward_usual(value: float, usual: tuple[float, float]) -> float:
    """`value` moved into the usual range: its nearest bound (unchanged when inside)."""
    return min(max(value, usual[0]), usual[1])
