"""What the rltrain callback sees of each RLlib algorithm it watches: SAC (a 1-D Box
action space), PPO and DQN (a Discrete one). For each: its `AgentView`
(integrations/rllib_view.py, rllib_value_view.py), the actions its episodes recorded as
the env got them, the update metrics of an iteration (its learner's report; PPO's step
measured on the iteration's samples; DQN's epsilon from the env runner), the env steps
one update trains on, and how many of the newest transitions the diagnostics keep. The
callback (integrations/rllib.py) asks this module once per run; the per-iteration work
is its own. This module imports nothing of Ray.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from gymnasium import spaces

from rltrain.integrations.rllib_record import Chunk
from rltrain.integrations.rllib_value_view import (
    dqn_metrics,
    dqn_view,
    policy_step,
    ppo_metrics,
    ppo_view,
)
from rltrain.integrations.rllib_view import learner_metrics, rllib_view
from rltrain.integrations.value_views import LogProb
from rltrain.integrations.watcher import KEPT_ROWS, observation_dim
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView

# (the learner's report for the iteration, its training chunks, the env runner's
# epsilon) -> the update metrics every update of the iteration is told
Metrics = Callable[[Mapping[str, Any], Sequence[Chunk], "float | None"], dict[str, float]]


class Watched(NamedTuple):
    """What the callback sees of one algorithm."""

    view: AgentView
    to_env: Callable[[np.ndarray], np.ndarray]  # a chunk's actions -> [T, action_dim]
    metrics: Metrics
    kept_rows: int  # the newest transitions rltrain keeps for the diagnostics


def check_spaces(name: str, observation_space: Any, action_space: Any) -> tuple[int, int]:
    """obs_dim and action_dim (a Discrete action is its index: 1) of the spaces algorithm
    `name` acts in; a ConfigError in one line for spaces the callback does not watch."""
    if name == "SAC":
        kind = "a 1-D Box"
        acts = isinstance(action_space, spaces.Box) and len(action_space.shape) == 1
    else:
        kind, acts = "a Discrete", isinstance(action_space, spaces.Discrete)
    if not acts:
        raise ConfigError(f"the rltrain callback watches RLlib's {name} in {kind} action "
                          f"space, not {action_space}")
    obs_dim = observation_dim(observation_space)
    return obs_dim, int(action_space.shape[0]) if name == "SAC" else 1


def rows_per_update(config: Any, name: str) -> int:
    """The env steps one update trains on (RLlib reports the steps trained): PPO's
    minibatch, else the train batch."""
    if name == "PPO" and config.minibatch_size:
        return int(config.minibatch_size)
    return int(config.total_train_batch_size)


def indices(actions: np.ndarray) -> np.ndarray:
    """Discrete actions as the hooks see them: each its index, [T, 1]."""
    return np.asarray(actions, np.float32).reshape(len(actions), 1)


def iteration_step(log_prob: LogProb, chunks: Sequence[Chunk], clip: float,
                   device: torch.device) -> dict[str, float]:
    """PPO's policy step over the iteration's steps (`policy_step`); none without them."""
    kept = [chunk for chunk in chunks if chunk.logp is not None and len(chunk.rewards)]
    if not kept:
        return {}
    obs = np.concatenate([chunk.obs[:-1] for chunk in kept])
    actions = np.concatenate([indices(chunk.actions) for chunk in kept])
    logp = np.concatenate([chunk.logp for chunk in kept])
    return policy_step(log_prob, obs, actions, logp, clip, device)


def watched(name: str, module: Any, algorithm_config: Any, config: TrainConfig,
            updates: Callable[[], int]) -> Watched:
    """What the callback sees of algorithm `name`, whose learner's RLModule is `module`."""
    space = module.action_space
    replayed = min(config.replay_buffer_size, config.learning_starts + KEPT_ROWS)
    if name == "SAC":
        view, scale = rllib_view(module, space.low, space.high,
                                 bool(algorithm_config.normalize_actions), config.gamma,
                                 updates)
        return Watched(view, scale.to_env_np,
                       lambda learner, chunks, epsilon: learner_metrics(learner), replayed)
    if name == "DQN":
        return Watched(dqn_view(module, space, config.gamma, updates), indices,
                       lambda learner, chunks, epsilon: dqn_metrics(learner, epsilon),
                       replayed)
    view, log_prob = ppo_view(module, space, config.gamma, updates)
    clip = float(algorithm_config.clip_param)

    def metrics(learner: Mapping[str, Any], chunks: Sequence[Chunk],
                epsilon: float | None) -> dict[str, float]:
        return {**ppo_metrics(learner), **iteration_step(log_prob, chunks, clip, view.device)}

    return Watched(view, indices, metrics, KEPT_ROWS)
