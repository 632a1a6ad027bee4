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

class HiddenDimensions(gym.ObservationWrapper):
    """Observation dimensions `hidden` left out (a velocity the sensors do not give):
    the observation no longer holds the state, so the next one is not a function of it
    and the action."""

    def __init__(self, env: gym.Env, hidden: list[int]) -> None:
        super().__init__(env)
        space = env.observation_space
        self.kept = [d for d in range(space.shape[0]) if d not in set(hidden)]
        self.observation_space = gym.spaces.Box(space.low[self.kept], space.high[self.kept],
                                                dtype=np.float32)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, np.float32)[self.kept]


class ObservationNoise(gym.ObservationWrapper):
    """Gaussian noise of `std` on every observation dimension (a noisy sensor)."""

    def __init__(self, env: gym.Env, std: float, seed: int = 0) -> None:
        super().__init__(env)
        self.std, self.rng = std, np.random.default_rng(seed)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        noise = self.rng.normal(0.0, self.std, np.shape(obs))
        return (np.asarray(obs) + noise).astype(np.float32)


class ObservationDelay(gym.Wrapper):
    """The observation of `steps` env steps ago (a sensor that lags): the action's effect
    shows only `steps` steps later."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        super().__init__(env)
        self.steps, self.queue = steps, []

    def reset(self, **kwargs: Any) -> tuple:
        obs, info = self.env.reset(**kwargs)
        self.queue = [obs] * (self.steps + 1)
        return obs, info

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.queue = [*self.queue[1:], obs]
        return self.queue[0], reward, terminated, truncated, info


class StaleObservation(gym.Wrapper):
    """`step` returns the reset observation every time (a copy made once)."""

    def reset(self, **kwargs: Any) -> tuple:
        obs, info = self.env.reset(**kwargs)
        self.first = np.array(obs)
        return obs, info

    def step(self, action: Any) -> tuple:
        _, reward, terminated, truncated, info = self.env.step(action)
        return self.first.copy(), reward, terminated, truncated, info


class RewardNoise(gym.Wrapper):
    """Gaussian noise of `std` added to every reward (a measured, noisy reward)."""

    def __init__(self, env: gym.Env, std: float, seed: int = 0) -> None:
        super().__init__(env)
        self.std, self.rng = std, np.random.default_rng(seed)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return (obs, float(reward) + float(self.rng.normal(0.0, self.std)), terminated,
                truncated, info)


class RewardClip(gym.RewardWrapper):
    """Rewards clipped to [low, high] (Atari's clipping on a reward of another scale)."""

    def __init__(self, env: gym.Env, low: float, high: float) -> None:
        super().__init__(env)
        self.low, self.high = low, high

    def reward(self, reward: float) -> float:
        return float(np.clip(reward, self.low, self.high))


class TerminateAfter(gym.Wrapper):
    """Every episode ends `terminated` after `steps` steps (a wrong end-of-task test)."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        super().__init__(env)
        self.steps, self.count = steps, 0

    def reset(self, **kwargs: Any) -> tuple:
        self.count = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.count += 1
        return obs, reward, terminated or self.count >= self.steps, truncated, info


FAULTS = {"reward_scale": RewardScale, "observation_scale": ObservationScale,
          "time_limit_terminal": TimeLimitTerminal, "ignored_action": IgnoredAction,
          "small_action_units": SmallActionUnits, "sparse_reward": SparseReward,
          "reward_terms": PendulumTerms, "hidden_dimensions": HiddenDimensions,
          "observation_noise": ObservationNoise, "observation_delay": ObservationDelay,
          "stale_observation": StaleObservation, "reward_noise": RewardNoise,
          "reward_clip": RewardClip, "terminate_after": TerminateAfter}


def faulty(base: str, fault: str, base_kwargs: dict[str, Any] | None = None,
           **params: Any) -> gym.Env:
    """`base` made with `base_kwargs` (an env's own keywords), wrapped in `fault`."""
    return FAULTS[fault](gym.make(base, **(base_kwargs or {})), **params)


gym.register("Faulty-v0", entry_point=faulty)
