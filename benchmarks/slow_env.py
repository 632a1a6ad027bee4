"""Pendulum whose every step waits `step_ms` milliseconds: a stand-in for a simulator
that runs elsewhere (a physics engine's server, a robot in the loop), which takes wall
time but little of this machine's CPU. `benchmarks/workers.py` trains on it as
`slow_env:SleepyPendulum-v0` with `env_kwargs: {step_ms: 20}`."""

from __future__ import annotations

import time

import gymnasium as gym


class SleepyPendulum(gym.Wrapper):
    def __init__(self, step_ms: float = 20.0) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.seconds = step_ms / 1000

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


gym.register("SleepyPendulum-v0", entry_point=SleepyPendulum)
