"""CrossQ: Bhatt et al., "CrossQ: Batch Normalization in Deep Reinforcement Learning for
Greater Sample Efficiency and Simplicity" (ICLR 2024).

The algorithm's entry (agents/registry.py names this module): its agent, over the update
of agents/crossq_update.py, with autograd's gradients stepped by `torch.optim.Adam`
(`update_backend: autograd`, the reference, any network), or with hand-written gradients
on flat buffers (`fused`, agents/crossq_fused.py: the stock ReLU MLPs, with CrossQ's
batch renormalisation). `auto` takes the fused update on the CPU for the stock networks
where torch has its private ops, autograd otherwise. CrossQ explores by sampling its
own policy; its checkpoint holds its temperature and no target network.
"""

from __future__ import annotations

import numpy as np
import torch

from rltrain.agents.backends import choose_backend
from rltrain.agents.base import Agent, CommonSettings, Implementation
from rltrain.agents.crossq_fused import FusedCrossQAgent
from rltrain.agents.crossq_update import STATE_KEYS, CrossQAgent, make_actor
from rltrain.agents.registry import CrossQOptions


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: CrossQOptions, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    """CrossQ's agent for `backend` (agents/backends.py `choose_backend`: there is no
    flat-Adam variant, so other networks train with `torch.optim.Adam`, which imports
    torch._dynamo), and a warning when `auto` had to fall back; `fused` for a network
    or a torch it cannot run is a ValueError naming why."""
    chosen, warning = choose_backend(backend, common, device)
    cls = FusedCrossQAgent if chosen == "fused" else CrossQAgent
    return cls(obs_dim, action_low, action_high, common, options, device), warning


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS, make_actor=make_actor,
                                network_counters=("steps",))
