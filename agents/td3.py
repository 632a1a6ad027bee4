"""TD3: Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods"
(2018): the deterministic actor-critic update (agents/deterministic.py) with clipped
double Q, delayed actor and target updates, and target policy smoothing. Exploration is
the configured action noise, added by the collector.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from rltrain.agents.backends import make_agent
from rltrain.agents.base import Agent, CommonSettings, Implementation, built_from_spec
from rltrain.agents.deterministic import STATE_KEYS, DDPGSettings
from rltrain.agents.registry import TD3Options
from rltrain.networks.actor import Actor


def settings(common: CommonSettings, options: TD3Options) -> DDPGSettings:
    """The update's settings: the common ones and TD3's delay and smoothing."""
    return DDPGSettings(
        **{f.name: getattr(common, f.name) for f in dataclasses.fields(common)},
        policy_delay=options.policy_delay, target_noise=options.target_policy_noise,
        target_noise_clip=options.target_noise_clip)


def build(obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
          common: CommonSettings, options: TD3Options, device: torch.device,
          backend: str = "auto") -> tuple[Agent, str | None]:
    return make_agent(obs_dim, action_low, action_high, settings(common, options), device,
                      backend)


IMPLEMENTATION = Implementation(build=build, state_keys=STATE_KEYS,
                                make_actor=built_from_spec(Actor))
