"""Stochastic policy network of SAC (Haarnoja et al. 2018): a tanh-squashed Gaussian.

obs -> MLP -> the mean and log-std of a Gaussian over the pre-squash action u; the
action is tanh(u), scaled and offset into the env's bounds, as `Actor` does. Called as a
module it gives the deterministic action tanh(mean): what evaluation, `rltrain eval` and
the diagnostics' state-action map read, so it stands wherever a deterministic actor
does. Called with `explore=True` (the agent's exploring step) it gives that action
together with an exploring one drawn in the same pass (`Acting`): still a call of the
module, so a forward hook on the actor (the state-action map's) sees every acting pass.
`sample` draws an exploring action with its log-probability, for the update.

The log-probability is that of the squashed action in the [-1, 1] units SAC's target
entropy is stated in (-dim(A), as in Stable-Baselines3), whatever the env's bounds.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from rltrain.networks.batch_renorm import BatchRenorm, Renorm
from rltrain.networks.mlp import NetworkSpec, hidden_stack, register_action_bounds

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # as Stable-Baselines3 clamps it
TANH_EPS = 1e-6  # keeps log(1 - tanh(u)^2) finite where tanh saturates
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Acting(NamedTuple):
    """One exploring acting pass, each [B, action_dim] in the env's units."""

    mode: torch.Tensor    # the deterministic action tanh(mean): first, as hooks read it
    action: torch.Tensor  # the exploring action tanh(mean + std * noise)
    noise: torch.Tensor   # its standard normal draws


class GaussianActor(nn.Module):
    """obs [B, obs_dim] -> deterministic action [B, action_dim] within the bounds; `sample`
    for an exploring one."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 spec: NetworkSpec | None = None, renorm: Renorm | None = None) -> None:
        super().__init__()
        spec = spec or NetworkSpec()
        action_dim = register_action_bounds(self, action_low, action_high)
        self.spec = spec
        # `renorm`: batch renormalisation before each linear layer and before the heads
        # (CrossQ's actor, networks/batch_renorm.py).
        self.latent, width = hidden_stack(
            obs_dim, spec, None if renorm is None else functools.partial(BatchRenorm,
                                                                         settings=renorm))
        self.mu = nn.Linear(width, action_dim)
        self.log_std = nn.Linear(width, action_dim)

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std [B, action_dim] of the Gaussian over u."""
        latent = self.latent(obs)
        return self.mu(latent), self.log_std(latent).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def forward(self, obs: torch.Tensor, explore: bool = False,
                generator: torch.Generator | None = None) -> torch.Tensor | Acting:
        """The deterministic action [B, action_dim]; with `explore`, an `Acting` of it and
        an exploring action drawn from `generator`, from one pass of the network."""
        mean, log_std = self.distribution(obs)
        mode = torch.tanh(mean) * self.action_scale + self.action_bias
        if not explore:
            return mode
        noise = torch.randn(mean.shape, device=mean.device, generator=generator)
        action = torch.tanh(mean + log_std.exp() * noise) * self.action_scale + self.action_bias
        return Acting(mode, action, noise)

    def sample(self, obs: torch.Tensor,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """An exploring action [B, action_dim] in the env's units (reparameterised, so it
        carries the gradient) and its log-probability [B, 1]."""
        mean, log_std = self.distribution(obs)
        std = log_std.exp()
        eps = torch.randn(mean.shape, device=mean.device, generator=generator)
        u = mean + std * eps
        squashed = torch.tanh(u)
        # Gaussian log-density of u, then the change of variables through tanh.
        log_prob = (-0.5 * eps.square() - log_std - HALF_LOG_2PI).sum(-1, keepdim=True)
        log_prob = log_prob - torch.log1p(-squashed.square() + TANH_EPS).sum(-1, keepdim=True)
        return squashed * self.action_scale + self.action_bias, log_prob
