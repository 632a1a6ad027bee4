"""The agent a config asks for: its settings, network specs and update backend.

The agent layer knows nothing of rltrain's config; this is where the config's names
(`actor_lr`, `networks.actor.activation`, the algorithm's own section such as
`td3.policy_delay`) become the plain `CommonSettings` and options the algorithm's
`build` takes (agents/registry.py names the algorithm's module).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.agents.base import Agent, CommonSettings
from rltrain.agents.probes import gradient_probe
from rltrain.agents.registry import algorithm
from rltrain.networks.mlp import NetworkSpec
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import CheckpointError, ConfigError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.seeding import AGENT, derive_seed


def network_spec(config: TrainConfig, net: str) -> NetworkSpec:
    """The architecture of "actor" or "critic"."""
    section = getattr(config.networks, net)
    hidden = section.hidden_sizes if section.hidden_sizes is not None else config.hidden_sizes
    return NetworkSpec(tuple(hidden), section.activation, section.layer_norm)


def common_settings(config: TrainConfig) -> CommonSettings:
    """What every algorithm takes, from the config's top-level keys."""
    return CommonSettings(
        gamma=config.gamma, tau=config.tau, actor_lr=config.actor_lr,
        critic_lr=config.critic_lr, grad_clip_norm=config.grad_clip_norm,
        actor_net=network_spec(config, "actor"), critic_net=network_spec(config, "critic"),
        seed=derive_seed(config.seed, AGENT), matmul_kernel=config.matmul_kernel)


def algorithm_options(config: TrainConfig) -> Any:
    """The options of the config's algorithm (its own section), or None."""
    entry = algorithm(config.algo)
    if entry.section is None:
        return None
    return entry.options_from(dataclasses.asdict(getattr(config, entry.section)))


def build_agent(config: TrainConfig, obs_dim: int, action_low: np.ndarray,
                action_high: np.ndarray, device: torch.device) -> tuple[Agent, str | None]:
    """The run's agent and, when `update_backend: auto` had to fall back, a warning."""
    build = algorithm(config.algo).implementation().build
    try:
        return build(obs_dim, action_low, action_high, common_settings(config),
                     algorithm_options(config), device, config.update_backend)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def agent_view(agent: Agent, action_low: np.ndarray, action_high: np.ndarray) -> AgentView:
    """What the diagnostics may see of `agent` (its own `q1` where it has one: the base
    Agent's optional methods)."""
    return AgentView(
        actor=agent.actor, critic=agent.critic,
        q_value=getattr(agent, "q1", agent.critic.q1), act=agent.act,
        probe=functools.partial(gradient_probe, agent), updates=lambda: agent.updates,
        networks=agent.networks, action_low=np.asarray(action_low, np.float32),
        action_high=np.asarray(action_high, np.float32), device=agent.device)


def checkpoint_config(payload: dict, path: str | Path) -> TrainConfig:
    """The validated config a checkpoint holds; an invalid one is a CheckpointError."""
    try:
        return config_from_dict(payload["config"])
    except ConfigError as exc:
        raise CheckpointError(f"checkpoint '{path}' holds an invalid config: {exc}") from None


def checkpoint_actor(payload: dict, config: TrainConfig, path: str | Path) -> nn.Module:
    """The actor of a checkpoint (loaded by `utils.checkpoint.load_checkpoint`, `config`
    its validated config) on the CPU in eval mode, sized by the checkpoint's `spaces`
    record: the env's own spaces when `check_spaces` has passed."""
    spaces = payload["spaces"]
    low = np.asarray(spaces["action_low"], dtype=np.float32)
    high = np.asarray(spaces["action_high"], dtype=np.float32)
    make_actor = algorithm(config.algo).implementation().make_actor
    actor = make_actor(int(spaces["obs_dim"]), low, high, network_spec(config, "actor"),
                       algorithm_options(config))
    try:
        actor.load_state_dict(payload["actor"])
    except (RuntimeError, KeyError, TypeError) as exc:
        raise CheckpointError(f"checkpoint '{path}': actor weights do not load "
                              f"({str(exc).splitlines()[0]})") from None
    if not all(torch.isfinite(p).all() for p in actor.parameters()):
        raise CheckpointError(f"checkpoint '{path}': the actor's weights contain NaN/inf, so "
                              "its returns would mean nothing; evaluate an earlier checkpoint")
    return actor.eval()
