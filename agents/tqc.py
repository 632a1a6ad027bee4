"""TQC: Kuznetsov et al., "Controlling Overestimation Bias with Truncated Mixture of
Continuous Distributional Quantile Critics" (ICML 2020).

The algorithm's entry (agents/registry.py names this module): its agent, the update of
agents/tqc_update.py, autograd's and torch.optim's (`update_backend: fused` is refused).
"""

from __future__ import annotations

import numpy as np
import torch

from rltrain.agents.base import Agent, CommonSettings, Implementation, built_from_spec
from rltrain.agents.registry import TQCOptions
from rltrain.agents.sac_update import STATE_KEYS
from rltrain.agents.tqc_update import TQCAgent
from rltrain.networks.gaussian_actor import GaussianActor


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: TQCOptions, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    """TQC's agent; it has no hand-written update (`fused`)."""
    if backend == "fused":
        raise ValueError("update_backend fused is DDPG's, TD3's and SAC's; tqc trains with "
                         "autograd (update_backend auto or autograd)")
    return TQCAgent(obs_dim, action_low, action_high, common, options, device), None


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(GaussianActor))
