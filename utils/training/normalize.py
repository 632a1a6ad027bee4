"""Running normalisation of observations and rewards, as Stable-Baselines3's VecNormalize.

Observations: a running mean and variance (float64, Chan et al.'s parallel update: the
exact mean and population variance of every observation seen so far) of the
observations the training envs return; the agent sees, and the replay buffer stores,
`clip((obs - mean) / sqrt(var + epsilon), -clip, clip)`. Rewards: each training env
keeps its discounted return `G <- gamma * G + r` (zeroed when its episode ends), and the
reward stored for learning is `clip(r / sqrt(var(G) + epsilon), -clip, clip)`, so that
the critic's targets have about unit scale whatever the env's reward scale; reported
returns stay raw. Statistics are updated on training steps only: evaluation (and
`rltrain eval`, `rltrain.load_policy`) uses them frozen, as the checkpoint holds them.
NaN/inf values are left out of every update. With both options off, everything passes
through unchanged.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltrain.utils.config.env import NormalizeConfig
from rltrain.utils.errors import CheckpointError


class RunningMeanStd:
    """The mean and (population) variance of every row given to `update`; before the
    first, mean 0 and variance 1."""

    def __init__(self) -> None:
        self.mean: np.ndarray = np.zeros(())
        self.var: np.ndarray = np.ones(())
        self.count = 0

    def update(self, batch: np.ndarray) -> None:
        """Add the rows of `batch` ([n, *shape])."""
        batch = np.asarray(batch, dtype=np.float64)
        n = batch.shape[0]
        if n == 0:
            return
        batch_mean, batch_var = batch.mean(axis=0), batch.var(axis=0)
        if self.count == 0:
            self.mean, self.var, self.count = batch_mean, batch_var, n
            return
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta ** 2 * (self.count * n / total)
        self.mean = self.mean + delta * (n / total)
        self.var, self.count = m2 / total, total

    def state_dict(self) -> dict[str, Any]:
        return {"mean": np.asarray(self.mean).tolist(), "var": np.asarray(self.var).tolist(),
                "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mean = np.asarray(state["mean"], dtype=np.float64)
        var = np.asarray(state["var"], dtype=np.float64)
        count = state["count"]
        if mean.shape != var.shape or mean.ndim > 1 or not np.all(var >= 0) \
                or not isinstance(count, int) or count < 0:
            raise ValueError("running statistics that do not fit together")
        self.mean, self.var, self.count = mean, var, count


class Normalizer:
    """The running statistics of one run's training envs and what they change."""

    def __init__(self, settings: NormalizeConfig, gamma: float, num_envs: int) -> None:
        self.settings, self.gamma = settings, gamma
        self.obs_rms, self.ret_rms = RunningMeanStd(), RunningMeanStd()
        self.returns = np.zeros(num_envs)  # each env's discounted return so far

    @property
    def active(self) -> bool:
        return self.settings.observations or self.settings.rewards

    def observation(self, obs: np.ndarray) -> np.ndarray:
        """What the agent sees of `obs` (one or a batch), with the current statistics."""
        if not self.settings.observations:
            return obs
        clip, scale = self.settings.clip, np.sqrt(self.obs_rms.var + self.settings.epsilon)
        return np.clip((np.asarray(obs, dtype=np.float64) - self.obs_rms.mean) / scale,
                       -clip, clip).astype(np.float32)

    def update_observations(self, obs: np.ndarray) -> None:
        """Add a training step's observations ([num_envs, obs_dim]) to the statistics."""
        if self.settings.observations:
            obs = np.asarray(obs, dtype=np.float64)
            self.obs_rms.update(obs[np.isfinite(obs).all(axis=1)])

    def rewards(self, rewards: np.ndarray, done: np.ndarray) -> np.ndarray:
        """The rewards to store for a training step's raw `rewards` ([num_envs]); `done`:
        which envs' episodes ended with it."""
        if not self.settings.rewards:
            return rewards
        rewards = np.asarray(rewards, dtype=np.float64)
        finite = np.isfinite(rewards)
        self.returns[finite] = self.returns[finite] * self.gamma + rewards[finite]
        self.ret_rms.update(self.returns[finite])
        scale = np.sqrt(self.ret_rms.var + self.settings.epsilon)
        clip = self.settings.clip
        scaled = np.where(finite, np.clip(rewards / scale, -clip, clip), rewards)
        self.returns[np.asarray(done, dtype=bool)] = 0.0
        return scaled

    def state_dict(self) -> dict[str, Any]:
        return {"observations": self.obs_rms.state_dict(),
                "returns_rms": self.ret_rms.state_dict(), "returns": self.returns.tolist()}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Statistics saved by `state_dict` (None: a checkpoint written before them)."""
        if state is None:
            return
        self.obs_rms.load_state_dict(state["observations"])
        self.ret_rms.load_state_dict(state["returns_rms"])
        returns = np.asarray(state["returns"], dtype=np.float64)
        if returns.shape == self.returns.shape:
            self.returns = returns

    def frozen_env(self, env: gym.Env) -> gym.Env:
        """`env` whose observations are normalised with these statistics, never updated
        (evaluation); `env` itself when observations are not normalised."""
        return _FrozenObservations(env, self) if self.settings.observations else env


class _FrozenObservations(gym.ObservationWrapper):
    """Observations as the agent sees them, read from a `Normalizer` that the training
    steps update (and this wrapper never does)."""

    def __init__(self, env: gym.Env, normalizer: Normalizer) -> None:
        super().__init__(env)
        self.normalizer = normalizer

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return self.normalizer.observation(observation)


def normalizer_from_checkpoint(payload: dict[str, Any], settings: NormalizeConfig,
                               gamma: float) -> Normalizer:
    """The frozen statistics a checkpoint holds (for `rltrain eval`, `load_policy`)."""
    normalizer = Normalizer(settings, gamma, num_envs=1)
    try:
        normalizer.load_state_dict(payload.get("normalize"))
        if normalizer.obs_rms.mean.shape not in ((), (int(payload["spaces"]["obs_dim"]),)):
            raise ValueError("statistics of another observation size")
    except (KeyError, TypeError, ValueError):
        raise CheckpointError("the checkpoint's field 'normalize' is not as rltrain writes "
                              "it (running statistics)") from None
    return normalizer
