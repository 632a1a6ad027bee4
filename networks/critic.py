"""Twin-Q critic (clipped double Q, Fujimoto et al. 2018; section 3.1 of the source doc).

The two Q-networks are stored as one stacked ensemble: every layer holds a weight of
shape [n_critics, in, out], and `forward` runs each layer as one batched matmul
(`baddbmm`). The update does not call
`forward`: it takes the members apart (agents/backprop.py), because on some CPUs a
batched matmul of the thin output-layer shapes is several times slower than plain ones.
Actions enter normalised to [-1, 1] with the actor's scale and offset, so the critic
sees inputs of similar size whatever the env's action units.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn


class EnsembleLinear(nn.Module):
    """`n` independent linear layers applied to `n` inputs at once: [n, B, in] -> [n, B, out]."""

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(n, 1, out_features))
        # Same initialisation as each member being an nn.Linear (uniform, 1/sqrt(fan_in)).
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)

    def member(self, x: torch.Tensor, index: int) -> torch.Tensor:
        """Member `index` alone: [B, in] -> [B, out]."""
        return torch.addmm(self.bias[index], x, self.weight[index])


class Critic(nn.Module):
    """(obs [B, obs_dim], action [B, action_dim]) -> Q values [n_critics, B, 1]."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 hidden_sizes: tuple[int, ...] = (256, 256), n_critics: int = 2) -> None:
        super().__init__()
        low = torch.as_tensor(action_low, dtype=torch.float32)
        high = torch.as_tensor(action_high, dtype=torch.float32)
        self.n_critics = n_critics
        widths = [obs_dim + low.numel(), *hidden_sizes, 1]
        self.layers = nn.ModuleList(
            EnsembleLinear(n_critics, w_in, w_out) for w_in, w_out in itertools.pairwise(widths))
        self.register_buffer("action_scale", (high - low) / 2)
        self.register_buffer("action_bias", (high + low) / 2)

    def inputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return torch.cat([obs, (action - self.action_bias) / self.action_scale], dim=-1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = self.inputs(obs, action).expand(self.n_critics, -1, -1)  # [n, B, in]
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)  # [n, B, 1]

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic alone, [B, 1]: what the actor maximises (as in DDPG/TD3)."""
        x = self.inputs(obs, action)
        for layer in self.layers[:-1]:
            x = torch.relu(layer.member(x, 0))
        return self.layers[-1].member(x, 0)

    def hidden_activations(self, obs: torch.Tensor, action: torch.Tensor) -> list[torch.Tensor]:
        """The output of every hidden ReLU, [n_critics, B, width] each."""
        outputs = []
        x = self.inputs(obs, action).expand(self.n_critics, -1, -1)
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
            outputs.append(x)
        return outputs
