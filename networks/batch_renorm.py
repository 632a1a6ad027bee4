"""Batch renormalisation (Ioffe, "Batch Renormalization: Towards Reducing Minibatch
Dependence in Batch-Normalized Models", NeurIPS 2017), the normalisation CrossQ puts in
its actor and critic (Bhatt et al., ICLR 2024).

In a training pass a layer normalises with the batch's mean and standard deviation and
then corrects the result towards its running statistics: x_hat = (x - mu_B) / sigma_B *
r + d, with r = sigma_B / sigma and d = (mu_B - mu) / sigma clipped to [1/r_max, r_max]
and [-d_max, d_max] and held constant for the gradient (the paper's eq. in section 3).
For its first `warmup_steps` training passes r = 1 and d = 0: plain batch normalisation,
while the running statistics settle. In eval mode it normalises with the running
statistics alone and changes nothing. The running statistics follow the batches' with
rate `momentum`, and the variance is the unbiased one, as sb3-contrib's layer does.

The statistics are over the batch dimension, the one before the features: an input
[B, F] has one set; an ensemble's [n, B, F] (networks/critic.py) one per member.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

R_MAX, D_MAX = 3.0, 5.0  # the clips of r and d (sb3-contrib's and SBX's)


@dataclass(frozen=True)
class Renorm:
    """The settings of every batch renormalisation layer of a network."""

    momentum: float = 0.01
    eps: float = 0.001
    warmup_steps: int = 100_000


class BatchRenorm(nn.Module):
    """Batch renormalisation of [..., B, width] inputs; `members`: an ensemble's size (its
    inputs [members, B, width], statistics and scale of each member's own)."""

    def __init__(self, width: int, settings: Renorm, members: int | None = None) -> None:
        super().__init__()
        shape = (1, width) if members is None else (members, 1, width)
        self.settings = settings
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))
        self.register_buffer("running_mean", torch.zeros(shape))
        self.register_buffer("running_var", torch.ones(shape))
        # Training passes so far: when the warm-up ends (a checkpoint keeps it).
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        # Whether a training pass moves the running statistics (a probe's does not).
        self.track = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return self._running(x, self.running_mean, self.running_var, self.weight,
                                 self.bias)
        eps = self.settings.eps
        batch_mean = x.mean(dim=-2, keepdim=True)
        batch_var = x.var(dim=-2, keepdim=True)
        batch_std = (batch_var + eps).sqrt()
        with torch.no_grad():  # r and d are constants for the gradient
            running_std = (self.running_var + eps).sqrt()
            r = (batch_std / running_std).clamp(1 / R_MAX, R_MAX)
            d = ((batch_mean - self.running_mean) / running_std).clamp(-D_MAX, D_MAX)
            # Decided on the device: no host sync per pass.
            warm = self.steps >= self.settings.warmup_steps
            r = torch.where(warm, r, torch.ones_like(r))
            d = torch.where(warm, d, torch.zeros_like(d))
            if self.track:
                self.running_mean.lerp_(batch_mean, self.settings.momentum)
                self.running_var.lerp_(batch_var, self.settings.momentum)
                self.steps += 1
        return ((x - batch_mean) / batch_std * r + d) * self.weight + self.bias

    def member(self, x: torch.Tensor, index: int) -> torch.Tensor:
        """Member `index` alone on [B, width], with its running statistics (eval mode)."""
        assert not self.training, "one member alone is run outside training passes only"
        return self._running(x, self.running_mean[index], self.running_var[index],
                             self.weight[index], self.bias[index])

    def _running(self, x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                 weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return (x - mean) / (var + self.settings.eps).sqrt() * weight + bias


@contextmanager
def training(net: nn.Module, track: bool = True) -> Iterator[nn.Module]:
    """`net` in train mode for the passes inside (its batch renormalisation layers
    normalise with the batch's statistics; with `track` they move their running ones),
    then back in eval mode, where the agents keep every network between updates."""
    renorms = [m for m in net.modules() if isinstance(m, BatchRenorm)]
    net.train()
    for layer in renorms:
        layer.track = track
    try:
        yield net
    finally:
        net.eval()
        for layer in renorms:
            layer.track = True
