"""Which implementation of the update a run gets (`update_backend`).

- `autograd` (agents/deterministic.py): the reference, for any network.
- `fused` (agents/fused.py): the same update with hand-written gradients, for the stock
  ReLU MLPs; refused for anything else, or when torch lacks one of its private ops.
- `auto`: fused on the CPU for the stock networks, where it measures faster
  (benchmarks/throughput.py); autograd otherwise (also on CUDA, where the fused path has
  not been measured faster). For an update that also has a flat-Adam variant (SAC's,
  TQC's: `choose_agent_class`), `auto` takes that one on the CPU for other networks.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

from rltrain.agents import fused_ops
from rltrain.agents.base import CommonSettings
from rltrain.agents.deterministic import DDPGAgent, DDPGSettings
from rltrain.agents.fused import FusedDDPGAgent

BACKENDS = ("auto", "autograd", "fused")
AgentClass = TypeVar("AgentClass", bound=type)


def choose_backend(requested: str, settings: CommonSettings,
                   device: torch.device) -> tuple[str, str | None]:
    """The backend `requested` resolves to, and a warning when `auto` had to fall back
    (DDPG's and TD3's here; CrossQ's in agents/crossq.py; SAC's and TQC's through
    `choose_agent_class`)."""
    if requested not in BACKENDS:
        raise ValueError(f"unknown update_backend {requested!r}; one of {', '.join(BACKENDS)}")
    if requested != "auto":
        return requested, None
    stock = settings.actor_net.is_stock and settings.critic_net.is_stock
    if not stock or device.type != "cpu":
        return "autograd", None
    missing = fused_ops.missing_ops()
    if missing:
        return "autograd", (f"torch {torch.__version__} lacks {', '.join(missing)}: the "
                            "update runs through autograd (update_backend autograd), which "
                            "is slower on the CPU but gives the same results")
    return "fused", None


def choose_agent_class(requested: str, settings: CommonSettings, device: torch.device,
                       reference: AgentClass, flat: AgentClass, fused: AgentClass
                       ) -> tuple[AgentClass, str | None]:
    """The agent class `requested` resolves to for an update with three implementations
    (SAC's, TQC's): the autograd `reference` stepped by torch.optim, the same gradients
    stepped by the flat Adam (`flat`), hand-written ones (`fused`); and `choose_backend`'s
    warning. `auto` takes the flat one on the CPU where the fused one does not apply
    (other networks than the stock MLP) and torch has the flat Adam's ops."""
    chosen, warning = choose_backend(requested, settings, device)
    if chosen == "fused":
        return fused, warning
    if requested == "auto" and device.type == "cpu" and not fused_ops.missing_ops():
        return flat, warning
    return reference, warning


def make_agent(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
               settings: DDPGSettings, device: torch.device,
               backend: str = "auto") -> tuple[DDPGAgent, str | None]:
    """The agent for `backend`, and a warning to show the user (or None). A backend that
    cannot run these settings is a ValueError naming why."""
    chosen, warning = choose_backend(backend, settings, device)
    cls = FusedDDPGAgent if chosen == "fused" else DDPGAgent
    return cls(obs_dim, action_low, action_high, settings, device), warning
