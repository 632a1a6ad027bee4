"""CrossQ: Bhatt et al., "CrossQ: Batch Normalization in Deep Reinforcement Learning for
Greater Sample Efficiency and Simplicity" (ICLR 2024).

The algorithm's entry (agents/registry.py names this module): its agent, the update of
agents/crossq_update.py, autograd's gradients stepped by `torch.optim.Adam`
(`update_backend: fused` is refused). CrossQ explores by sampling its own policy; its
checkpoint holds its temperature and no target network.
"""

from __future__ import annotations

import numpy as np
import torch

from rltrain.agents.base import Agent, CommonSettings, Implementation
from rltrain.agents.crossq_update import STATE_KEYS, CrossQAgent, make_actor
from rltrain.agents.registry import CrossQOptions


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: CrossQOptions, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    """CrossQ's agent; it has no hand-written update (`fused`)."""
    if backend == "fused":
        raise ValueError("update_backend fused is DDPG's, TD3's and SAC's; crossq trains with "
                         "autograd (update_backend auto or autograd)")
    return CrossQAgent(obs_dim, action_low, action_high, common, options, device), None


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS, make_actor=make_actor,
                                network_counters=("steps",))
