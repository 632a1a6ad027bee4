"""Twin-Q critic (clipped double Q, Fujimoto et al. 2018).

The two Q-networks are stored as one stacked ensemble: every linear layer holds a weight
of shape [n_critics, in, out], and `forward` runs each layer as one batched matmul
(`baddbmm`), so both critics cost one call per layer. Actions enter normalised to
[-1, 1] with the actor's scale and offset, so the critic sees inputs of similar size
whatever the env's action units.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rltrain.networks.batch_renorm import BatchRenorm, Renorm
from rltrain.networks.mlp import ACTIVATIONS, NetworkSpec, register_action_bounds


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


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last dimension with a scale and shift of each member's own."""

    def __init__(self, n: int, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, 1, width))
        self.bias = nn.Parameter(torch.zeros(n, 1, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias

    def member(self, x: torch.Tensor, index: int) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.weight[index] + self.bias[index]


class Critic(nn.Module):
    """(obs [B, obs_dim], action [B, action_dim]) -> Q values [n_critics, B, 1].

    `outputs`: values per critic (a quantile critic's, networks/quantile_critic.py);
    `renorm`: batch renormalisation before every linear layer, each critic with its own
    statistics (CrossQ's critic, networks/batch_renorm.py)."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 spec: NetworkSpec | None = None, n_critics: int = 2, outputs: int = 1,
                 renorm: Renorm | None = None) -> None:
        super().__init__()
        spec = spec or NetworkSpec()
        action_dim = register_action_bounds(self, action_low, action_high)
        self.spec, self.n_critics = spec, n_critics
        widths = [obs_dim + action_dim, *spec.hidden_sizes, outputs]
        self.layers = nn.ModuleList(
            EnsembleLinear(n_critics, w_in, w_out) for w_in, w_out in itertools.pairwise(widths))
        self.norms = nn.ModuleList(EnsembleLayerNorm(n_critics, w) for w in spec.hidden_sizes) \
            if spec.layer_norm else None
        self.renorms = None if renorm is None else nn.ModuleList(
            BatchRenorm(w, renorm, members=n_critics) for w in widths[:-1])
        # One module per hidden layer (they hold no parameters): hooks can tell them apart.
        self.activations = nn.ModuleList(ACTIVATIONS[spec.activation]()
                                         for _ in spec.hidden_sizes)

    def inputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return torch.cat([obs, (action - self.action_bias) / self.action_scale], dim=-1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = self.inputs(obs, action).expand(self.n_critics, -1, -1)  # [n, B, in]
        return self._stack(x, member=None)  # [n, B, 1]

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic alone, [B, 1]: what the actor maximises (as in DDPG/TD3)."""
        return self._stack(self.inputs(obs, action), member=0)

    def _stack(self, x: torch.Tensor, member: int | None) -> torch.Tensor:
        """All critics on [n, B, in] (member None), or one of them on [B, in]."""
        def run(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
            return module(x) if member is None else module.member(x, member)

        *hidden, last = self.layers
        for index, layer in enumerate(hidden):
            if self.renorms is not None:
                x = run(self.renorms[index], x)
            x = run(layer, x)
            if self.norms is not None:
                x = run(self.norms[index], x)
            x = self.activations[index](x)
        if self.renorms is not None:
            x = run(self.renorms[-1], x)
        return run(last, x)
