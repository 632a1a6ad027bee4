"""SAC: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018).

The algorithm's entry (agents/registry.py names this module): its agent, built over the
update of agents/sac_update.py, with autograd's gradients stepped by `torch.optim.Adam`
(`update_backend: autograd`, the reference) or, with `auto` on the CPU where torch has
the ops, by the same Adam kernel on flat buffers (agents/sac_flat.py: the same update,
without torch.optim's import of torch._dynamo). SAC explores by sampling its own policy;
its checkpoint holds its temperature and no actor target.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.agents import fused_ops
from rltrain.agents.base import Agent, CommonSettings, Implementation, built_from_spec
from rltrain.agents.sac_flat import FlatSACAgent
from rltrain.agents.sac_update import STATE_KEYS, SACAgent
from rltrain.networks.gaussian_actor import GaussianActor


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: Any, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    """SAC's agent for `backend`; it has no hand-written update (`fused`)."""
    if backend == "fused":
        raise ValueError("update_backend fused is DDPG's and TD3's; sac trains with autograd "
                         "(update_backend auto or autograd)")
    flat = backend == "auto" and device.type == "cpu" and not fused_ops.missing_ops()
    cls = FlatSACAgent if flat else SACAgent
    return cls(obs_dim, action_low, action_high, common, options, device), None


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(GaussianActor))
