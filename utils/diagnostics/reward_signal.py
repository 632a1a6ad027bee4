"""Reward-signal statistics over a window of recent episodes.

The textbook statistics are kept and logged (coefficient of variation, now on |mean|,
since its formula breaks for negative rewards; the share of |z| > 3 steps; the trend
of the episode return), but the reward rules (utils/rules/reward_rules.py, which says
how each one uses them) judge statistics that separate healthy from broken signals:

- `penalty_share`: the share of the below-mean deviation mass carried by steps more
  than 6 standard deviations below the mean.
- `bonus_share`: the same for steps above the mean.
- `cv`: std / |mean| over the window.
- `max_abs`, `median_abs`: the scale of the rewards; `max_abs` is the largest ever
  seen, not a window statistic.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

EXTREME_Z = 6.0
MIN_EPISODES = 5


def reward_stats(rewards: np.ndarray, returns: np.ndarray) -> dict[str, float]:
    """Statistics of per-step `rewards` and per-episode `returns` (both 1-D)."""
    r = rewards.astype(np.float64)
    mean, std = float(r.mean()), float(r.std())
    dev = r - mean
    below, above = -dev[dev < 0].sum(), dev[dev > 0].sum()
    z = dev / std if std > 0 else np.zeros_like(dev)
    stats = {
        "mean": mean, "std": std, "cv": std / (abs(mean) + 1e-8),
        "spike_ratio": float(np.mean(np.abs(z) > 3.0)),
        "kurtosis": float(np.mean(z ** 4) - 3.0) if std > 0 else 0.0,
        "penalty_share": float(-dev[z < -EXTREME_Z].sum() / below) if below > 0 else 0.0,
        "bonus_share": float(dev[z > EXTREME_Z].sum() / above) if above > 0 else 0.0,
        "rms": float(np.sqrt(np.mean(r ** 2))),
        "median_abs": float(np.median(np.abs(r))),
        "trend": float(np.polyfit(np.arange(len(returns)), returns, 1)[0])
        if len(returns) > 1 else 0.0,
    }
    return stats


class RewardAnalyzer:
    """Keeps the per-step rewards of the last `window` episodes (bounded memory), each
    training env's episode in progress apart."""

    def __init__(self, window: int, num_envs: int = 1) -> None:
        self.episodes: deque[np.ndarray] = deque(maxlen=window)
        self._current: list[list[float]] = [[] for _ in range(num_envs)]
        self.max_abs = 0.0  # the largest |reward| of the run

    def add(self, reward: float, env: int = 0) -> None:
        self._current[env].append(reward)
        if math.isfinite(reward):  # at once: gradients are judged against it (gradients.py)
            self.max_abs = max(self.max_abs, abs(reward))

    def end_episode(self, env: int = 0) -> np.ndarray:
        rewards = np.asarray(self._current[env], dtype=np.float32)
        self._current[env] = []
        if rewards.size and np.isfinite(rewards).all():
            self.episodes.append(rewards)
            self.max_abs = max(self.max_abs, float(np.abs(rewards).max()))
        return rewards

    def stats(self) -> dict[str, float] | None:
        if len(self.episodes) < min(MIN_EPISODES, self.episodes.maxlen or MIN_EPISODES):
            return None
        rewards = np.concatenate(self.episodes)
        returns = np.array([e.sum() for e in self.episodes], dtype=np.float64)
        return {**reward_stats(rewards, returns), "max_abs": self.max_abs}

    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"episodes": [torch.from_numpy(e.copy()) for e in self.episodes],
                "current": [list(c) for c in self._current], "max_abs": self.max_abs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episodes.clear()
        self.episodes.extend(t.numpy() for t in state["episodes"])
        current = state["current"]
        if current and not isinstance(current[0], list):  # saved before num_envs: one env
            current = [current]
        self._current = [list(c) for c in current] or [[] for _ in self._current]
        self.max_abs = float(state["max_abs"])
