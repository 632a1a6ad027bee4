"""What a network is made of: its hidden widths, its activation and whether it normalises.

`NetworkSpec` is the plain description the actor and the critic are built from (the
`networks:` config section maps onto it); `mlp` builds the stack for one network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "gelu": nn.GELU}


@dataclass(frozen=True)
class NetworkSpec:
    """Hidden layers of one network: Linear -> [LayerNorm] -> activation, per width."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    layer_norm: bool = False

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; "
                             f"one of {', '.join(ACTIVATIONS)}")

    @property
    def is_stock(self) -> bool:
        """The plain ReLU MLP (what the accelerated update backend supports)."""
        return self.activation == "relu" and not self.layer_norm


def hidden_layers(in_dim: int, spec: NetworkSpec,
                  before_linear: Callable[[int], nn.Module] | None = None
                  ) -> tuple[list[nn.Module], int]:
    """The hidden layers of `spec` in order, and the width they end with; `before_linear`
    makes a layer of a width that goes before each linear one (a normalisation)."""
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in spec.hidden_sizes:
        if before_linear is not None:
            layers.append(before_linear(width))
        layers.append(nn.Linear(width, hidden))
        if spec.layer_norm:
            layers.append(nn.LayerNorm(hidden))
        layers.append(ACTIVATIONS[spec.activation]())
        width = hidden
    return layers, width


def hidden_stack(in_dim: int, spec: NetworkSpec,
                 before_linear: Callable[[int], nn.Module] | None = None
                 ) -> tuple[nn.Sequential, int]:
    """The hidden stack of `spec` alone (a network with several heads), and its width;
    with `before_linear`, one more of its layers at the end, before the heads."""
    layers, width = hidden_layers(in_dim, spec, before_linear)
    if before_linear is not None:
        layers.append(before_linear(width))
    return nn.Sequential(*layers), width


def mlp(in_dim: int, spec: NetworkSpec, out_dim: int) -> nn.Sequential:
    """The hidden stack of `spec` and a linear output layer."""
    layers, width = hidden_layers(in_dim, spec)
    return nn.Sequential(*layers, nn.Linear(width, out_dim))


def register_action_bounds(module: nn.Module, action_low: np.ndarray,
                           action_high: np.ndarray) -> int:
    """Give `module` the env's action bounds as `action_scale` (half the range) and
    `action_bias` (the middle): buffers, not parameters, so they move with .to(device)
    and are saved, never trained. Returns the action dimension."""
    low = torch.as_tensor(action_low, dtype=torch.float32)
    high = torch.as_tensor(action_high, dtype=torch.float32)
    assert low.shape == high.shape and low.ndim == 1 and bool((high > low).all())
    module.register_buffer("action_scale", (high - low) / 2)
    module.register_buffer("action_bias", (high + low) / 2)
    return low.numel()
