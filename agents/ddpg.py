"""DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning" (2016).

The algorithm's entry over the deterministic actor-critic update (agents/deterministic.py)
with the actor and targets stepped on every update and no target smoothing. As in
rltrain's TD3, the critic is a twin and its target takes the min of the two (clipped
double Q). Exploration is the configured action noise (`exploration_noise`,
`noise_type`), added by the collector.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from rltrain.agents.backends import make_agent
from rltrain.agents.base import Agent, CommonSettings, Implementation, built_from_spec
from rltrain.agents.deterministic import STATE_KEYS, DDPGSettings
from rltrain.networks.actor import Actor


def settings(common: CommonSettings, options: Any = None) -> DDPGSettings:
    """The update's settings: the actor stepped on every update, unsmoothed targets."""
    return DDPGSettings(**{f.name: getattr(common, f.name) for f in dataclasses.fields(common)})


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: Any, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    return make_agent(obs_dim, action_low, action_high, settings(common), device, backend)


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(Actor))
