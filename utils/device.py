"""Choosing the torch device from the config's `device: auto | cpu | cuda`."""

from __future__ import annotations

import torch

from rltrain.utils.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """auto -> CUDA when available, else CPU; an explicit cuda without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("config key 'device' is 'cuda' but CUDA is not available on this "
                          "machine (torch.cuda.is_available() is False); use auto or cpu")
    return torch.device(name)
