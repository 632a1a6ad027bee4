"""Which Stable-Baselines3 models RltrainCallback watches, and what it sees of each: the
registry entry of a watched-only algorithm (PPO, A2C, DQN) or an actor-critic (TD3,
DDPG, SAC, CrossQ, TQC), its `AgentView`, the buffer the diagnostics read, the losses
SB3 logs for it, and its settings as rltrain's config keys. The callback
(integrations/sb3.py) asks this module once per `learn()`; the per-step work is its own.
This module reads the model's attributes; it imports SB3 only where `check_model` asks
whether a model is off-policy.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from rltrain.agents.families import ON_POLICY, Q_LEARNING
from rltrain.agents.registry import ALGORITHMS, Algorithm
from rltrain.integrations.sb3_value_view import dqn_view, onpolicy_view, rollout_config
from rltrain.integrations.sb3_view import (
    SB3Replay,
    Scale,
    env_id,
    noise_scale,
    sb3_config,
    sb3_entry,
    sb3_view,
)
from rltrain.integrations.value_views import action_bounds
from rltrain.integrations.watcher import KEPT_ROWS, box_dims, observation_dim
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.seeding import REPLAY, derive_seed
from rltrain.utils.training.replay_buffer import ReplayBuffer

# What SB3 logs of its updates -> the update metrics the rules read, by what the model
# is: an actor-critic (None), or a watched-only algorithm's family. PPO and A2C: the
# losses, the entropy loss (minus the policy's mean entropy), the value function's
# explained variance and the learning rate; PPO also its approximate KL from the rollout's
# policy (its last epoch's mean), the share of clipped ratios and the clip range; a
# Gaussian policy its std. DQN: the TD loss and the learning rate (its epsilon is read
# from the model: `reported`).
LOSSES: dict[str | None, dict[str, str]] = {
    None: {"train/critic_loss": "critic_loss", "train/actor_loss": "actor_loss"},
    ON_POLICY: {"train/value_loss": "critic_loss", "train/policy_gradient_loss": "actor_loss",
                "train/policy_loss": "actor_loss", "train/entropy_loss": "entropy_loss",
                "train/explained_variance": "explained_variance",
                "train/approx_kl": "approx_kl", "train/clip_fraction": "clip_fraction",
                "train/clip_range": "clip_range", "train/learning_rate": "learning_rate",
                "train/std": "policy_std"},
    Q_LEARNING: {"train/loss": "critic_loss", "train/learning_rate": "learning_rate"},
}


def reported(model: Any, family: str | None, logged: dict[str, Any]) -> dict[str, float]:
    """The update metrics of the updates SB3 made since the callback last looked: what
    its logger holds of them (`logged`, by LOSSES), and DQN's epsilon as it is now."""
    metrics = {name: float(logged[key]) for key, name in LOSSES[family].items()
               if key in logged}
    if family == Q_LEARNING:
        metrics["exploration_rate"] = float(model.exploration_rate)
    return metrics


def check_model(model: Any) -> Algorithm | None:
    """The watched-only algorithm the model is (PPO, A2C: a Box or Discrete action space;
    DQN: Discrete), or None for TD3, DDPG, SAC, CrossQ, TQC or alike (off-policy, a
    replay buffer, an actor and a critic, Box actions). Anything else is a ConfigError
    in one line naming what is watched."""
    entry = sb3_entry(model)
    if entry is not None and not entry.trained:
        observation_dim(model.observation_space)
        action_bounds(model.action_space)
        return entry
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    if not isinstance(model, OffPolicyAlgorithm) or not hasattr(model, "critic") \
            or not hasattr(model, "actor"):
        known = ", ".join(e.sb3_class for e in ALGORITHMS.values() if e.sb3_class)
        raise ConfigError(f"RltrainCallback watches SB3's {known}, not "
                          f"{type(model).__name__}")
    box_dims(model.observation_space, model.action_space)
    return None


class Watched(NamedTuple):
    """What the callback sees of one model."""

    view: AgentView
    buffer: Any  # what the diagnostics read: SB3Replay, or `kept`
    noise: float  # the exploration noise's scale (NaN: not a Gaussian's added noise)
    scale: Scale | None  # SB3's [-1, 1] actions to the env's (None: kept as they are)
    # PPO's and A2C's newest transitions, which the callback adds (their rollout buffer
    # is emptied each rollout); None: SB3's replay buffer is read in place
    kept: ReplayBuffer | None


def watched(model: Any, entry: Algorithm | None) -> Watched:
    """The model's view and the buffer its diagnostics read (`entry`: check_model's)."""
    if entry is None:
        view, scale = sb3_view(model)
        return Watched(view, SB3Replay(model.replay_buffer, scale, model.device),
                       noise_scale(model), scale, None)
    if entry.family != ON_POLICY:
        return Watched(dqn_view(model), SB3Replay(model.replay_buffer, None, model.device),
                       math.nan, None, None)
    view = onpolicy_view(model)
    kept = ReplayBuffer(KEPT_ROWS, int(model.observation_space.shape[0]),
                        len(view.action_low), model.device,
                        seed=derive_seed(model.seed or 0, REPLAY))
    return Watched(view, kept, math.nan, None, kept)


def derived_config(model: Any, entry: Algorithm | None, start: int,
                   this_call: int) -> dict[str, Any]:
    """The model's settings as rltrain's config keys, for a run from env step `start`
    that goes on for `this_call` steps (PPO and A2C: to the end of the rollout that
    passes them, as SB3 stops)."""
    if entry is None:
        derived = sb3_config(model, start + this_call)
    else:
        if entry.family == ON_POLICY:
            rollout = model.n_steps * model.n_envs
            this_call = -(-this_call // rollout) * rollout
        derived = rollout_config(model, entry, start + this_call, env_id(model))
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:  # what VecNormalize does: the rules propose it no more
        derived["normalize"] = {"observations": bool(normalizer.norm_obs),
                                "rewards": bool(normalizer.norm_reward)}
    return derived


def env_rewards(model: Any, rewards: Any) -> Any:
    """The rewards the envs gave at this step: VecNormalize's originals where it scales
    them (the reward checks judge the env's reward signal, not its running scaling;
    the model's observations stay what the policy sees)."""
    normalizer = model.get_vec_normalize_env()
    if normalizer is None or not normalizer.norm_reward:
        return rewards
    return normalizer.get_original_reward()
