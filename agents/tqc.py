"""TQC: Kuznetsov et al., "Controlling Overestimation Bias with Truncated Mixture of
Continuous Distributional Quantile Critics" (ICML 2020).

The algorithm's entry (agents/registry.py names this module): its agent, built over the
update of agents/tqc_update.py, with autograd's gradients stepped by `torch.optim.Adam`
(`update_backend: autograd`, the reference), by the flat Adam kernel of
agents/fused_ops.py (`FlatTQCAgent`: the same update, without torch.optim's import of
torch._dynamo), or with hand-written gradients on those flat buffers (`fused`,
agents/tqc_fused.py: the stock ReLU MLPs only). `auto` chooses as SAC's does
(agents/backends.py `choose_agent_class`): the fused update on the CPU for the stock
networks where torch has its ops, the flat one for other networks, autograd on CUDA.
TQC explores by sampling its own policy; its checkpoint holds SAC's keys (its critics
are quantile critics) whichever backend wrote it, and the fused agent's also holds its
matrix-product kernel (`gemm`, agents/gemm.py), so that a checkpoint loads into any of
the three.
"""

from __future__ import annotations

import numpy as np
import torch

from rltrain.agents.backends import choose_agent_class
from rltrain.agents.base import Agent, CommonSettings, Implementation, built_from_spec
from rltrain.agents.registry import TQCOptions
from rltrain.agents.sac_flat import FlatSACAgent
from rltrain.agents.sac_update import STATE_KEYS
from rltrain.agents.tqc_fused import FusedTQCAgent
from rltrain.agents.tqc_update import TQCAgent
from rltrain.networks.gaussian_actor import GaussianActor


class FlatTQCAgent(FlatSACAgent, TQCAgent):
    """`TQCAgent` whose optimisers are `FlatAdam`s (agents/sac_flat.py)."""


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: TQCOptions, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    """TQC's agent for `backend`, and a warning when `auto` had to fall back; `fused`
    for a network it cannot run is a ValueError."""
    cls, warning = choose_agent_class(backend, common, device, reference=TQCAgent,
                                      flat=FlatTQCAgent, fused=FusedTQCAgent)
    return cls(obs_dim, action_low, action_high, common, options, device), warning


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(GaussianActor))
