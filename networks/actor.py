"""Deterministic policy network (DDPG, Lillicrap et al. 2016).

obs -> MLP -> tanh -> per-dimension scale and offset, so the output always lies inside
the env's action bounds, also when they are asymmetric (low != -high).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rltrain.networks.mlp import NetworkSpec, mlp, register_action_bounds


class Actor(nn.Module):
    """obs [B, obs_dim] -> action [B, action_dim] within [action_low, action_high]."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 spec: NetworkSpec | None = None) -> None:
        super().__init__()
        spec = spec or NetworkSpec()
        action_dim = register_action_bounds(self, action_low, action_high)
        self.spec = spec
        self.net = mlp(obs_dim, spec, action_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs)) * self.action_scale + self.action_bias
