"""Small environments for tests, importable as "fake_envs:FakePoint-v0" by gymnasium.make."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PointEnv(gym.Env):
    """Move a point toward 0 on a line; actions in asymmetric bounds [low, high]."""

    def __init__(self, low: float = 0.0, high: float = 4.0, horizon: int = 20) -> None:
        self.action_space = spaces.Box(np.float32(low), np.float32(high), (1,), np.float32)
        self.observation_space = spaces.Box(-10, 10, (2,), np.float32)
        self.horizon, self._t, self._x = horizon, 0, 0.0
        self._center = (low + high) / 2

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._x = 0, float(self.np_random.uniform(-1, 1))
        return self._obs(), {}

    def step(self, action):
        self._x += 0.1 * float(action[0] - self._center)
        self._t += 1
        reward = -abs(self._x)
        return self._obs(), reward, False, self._t >= self.horizon, {}

    def _obs(self) -> np.ndarray:
        return np.array([self._x, self._t / self.horizon], dtype=np.float32)


class DiscreteEnv(PointEnv):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = spaces.Discrete(3)


gym.register("FakePoint-v0", entry_point=PointEnv)
gym.register("FakeDiscrete-v0", entry_point=DiscreteEnv)
