"""Env faults users report, planted as wrappers around a Gymnasium env.

One registered id, `benchmarks.faults.envs:Faulty-v0`, takes the env to wrap and the
fault as keyword arguments (a run's `env_kwargs`), so that a case is plain config:

    env_name: benchmarks.faults.envs:Faulty-v0
    env_kwargs: {base: Pendulum-v1, fault: reward_scale, factor: 1.0e-4}
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class RewardScale(gym.RewardWrapper):
    """Every reward times `factor` (a reward in the wrong units)."""

    def __init__(self, env: gym.Env, factor: float) -> None:
        super().__init__(env)
        self.factor = factor

    def reward(self, reward: float) -> float:
        return float(reward) * self.factor


class ObservationScale(gym.ObservationWrapper):
    """Observations times `factor` (sensor units, unnormalized)."""

    def __init__(self, env: gym.Env, factor: float) -> None:
        super().__init__(env)
        self.factor = factor
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low * factor, space.high * factor,
                                                dtype=np.float32)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return (np.asarray(obs) * self.factor).astype(np.float32)


class TimeLimitTerminal(gym.Wrapper):
    """A time limit reported as a true end (`terminated`), as code written for the old
    `done` flag does: the critic learns that the last states are worth nothing."""

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, bool(terminated or truncated), False, info


class IgnoredAction(gym.ActionWrapper):
    """The action never reaches the env (a wiring bug): the env always gets the middle."""

    def action(self, action: np.ndarray) -> np.ndarray:
        space = self.env.action_space
        return ((space.low + space.high) / 2).astype(space.dtype)


class SmallActionUnits(gym.ActionWrapper):
    """The env takes actions in units `factor` times smaller than its declared bounds
    say (actions not rescaled to the env's range): the policy sits at the bounds."""

    def __init__(self, env: gym.Env, factor: float) -> None:
        super().__init__(env)
        self.factor = factor

    def action(self, action: np.ndarray) -> np.ndarray:
        return (np.asarray(action) * self.factor).astype(self.env.action_space.dtype)


class SparseReward(gym.Wrapper):
    """Only the end of an episode pays: the sum of its rewards on its last step."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.total = 0.0

    def reset(self, **kwargs: Any) -> tuple:
        self.total = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.total += float(reward)
        return obs, self.total if terminated or truncated else 0.0, terminated, truncated, info


class PendulumTerms(gym.Wrapper):
    """Pendulum's reward, -(theta^2 + 0.1 theta_dot^2 + 0.001 u^2), reported as its terms in
    info (`reward_angle`, `reward_velocity`, `reward_ctrl`), as Gymnasium's MuJoCo envs
    report theirs, with the control cost weighted by `ctrl_cost_weight` (Pendulum's own
    is 0.001; the name is MuJoCo's). The terms are of the state before the step and the
    clipped torque, as Pendulum computes its reward."""

    def __init__(self, env: gym.Env, ctrl_cost_weight: float = 0.001) -> None:
        super().__init__(env)
        self.ctrl_cost_weight = ctrl_cost_weight

    def step(self, action: Any) -> tuple:
        pendulum = self.env.unwrapped
        theta, theta_dot = pendulum.state
        torque = float(np.clip(np.asarray(action).reshape(-1)[0], -pendulum.max_torque,
                               pendulum.max_torque))
        angle = ((theta + np.pi) % (2 * np.pi)) - np.pi  # Pendulum's angle_normalize
        terms = {"reward_angle": -float(angle ** 2),
                 "reward_velocity": -0.1 * float(theta_dot ** 2),
                 "reward_ctrl": -self.ctrl_cost_weight * torque ** 2}
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, sum(terms.values()), terminated, truncated, {**info, **terms}


FAULTS = {"reward_scale": RewardScale, "observation_scale": ObservationScale,
          "time_limit_terminal": TimeLimitTerminal, "ignored_action": IgnoredAction,
          "small_action_units": SmallActionUnits, "sparse_reward": SparseReward,
          "reward_terms": PendulumTerms}


def faulty(base: str, fault: str, **params: Any) -> gym.Env:
    return FAULTS[fault](gym.make(base), **params)


gym.register("Faulty-v0", entry_point=faulty)
