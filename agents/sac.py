"""SAC: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018).

The algorithm's entry (agents/registry.py names this module): its agent, built over the
update of agents/sac_update.py, with autograd's gradients stepped by `torch.optim.Adam`
(`update_backend: autograd`, the reference), by the same Adam kernel on flat buffers
(agents/sac_flat.py: the same update, without torch.optim's import of torch._dynamo), or
with hand-written gradients on those buffers (`fused`, agents/sac_fused.py: the stock
ReLU MLPs only). `auto` takes the fused update on the CPU for the stock networks where
torch has its ops, the flat one for other networks, autograd on CUDA. SAC explores by
sampling its own policy; its checkpoint holds its temperature and no actor target.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.agents.backends import choose_agent_class
from rltrain.agents.base import Agent, CommonSettings, Implementation, built_from_spec
from rltrain.agents.sac_flat import FlatSACAgent
from rltrain.agents.sac_fused import FusedSACAgent
from rltrain.agents.sac_update import STATE_KEYS, SACAgent
from rltrain.networks.gaussian_actor import GaussianActor


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: Any, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    """SAC's agent for `backend` (agents/backends.py `choose_agent_class`), and a
    warning when `auto` had to fall back; `fused` for a network it cannot run is a
    ValueError. The autograd update is stepped by the flat Adam on the CPU with `auto`."""
    cls, warning = choose_agent_class(backend, common, device, reference=SACAgent,
                                      flat=FlatSACAgent, fused=FusedSACAgent)
    return cls(obs_dim, action_low, action_high, common, options, device), warning


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(GaussianActor))
