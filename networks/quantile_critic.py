"""TQC's critics (Kuznetsov et al., "Controlling Overestimation Bias with Truncated
Mixture of Continuous Distributional Quantile Critics", ICML 2020): each of `n_critics`
networks predicts `n_quantiles` quantiles of the return's distribution, at the levels
(2i + 1) / (2 n_quantiles).

They are networks/critic.py's ensemble with that many outputs per critic. Called as a
module they give each critic's mean quantile, [n_critics, B, 1]: the Q estimate that
everything outside TQC's update reads (the diagnostics, the probes) as it reads any
critic's; `quantiles` gives them all.
"""

from __future__ import annotations

import numpy as np
import torch

from rltrain.networks.critic import Critic
from rltrain.networks.mlp import NetworkSpec


class QuantileCritic(Critic):
    """(obs [B, obs_dim], action [B, action_dim]) -> quantiles [n_critics, B, n_quantiles]
    (`quantiles`), or their mean per critic [n_critics, B, 1] (called)."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 spec: NetworkSpec | None = None, n_critics: int = 2,
                 n_quantiles: int = 25) -> None:
        super().__init__(obs_dim, action_low, action_high, spec, n_critics,
                         outputs=n_quantiles)
        self.n_quantiles = n_quantiles

    def quantiles(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return super().forward(obs, action)  # [n, B, n_quantiles]

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.quantiles(obs, action).mean(dim=-1, keepdim=True)

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return super().q1(obs, action).mean(dim=-1, keepdim=True)
