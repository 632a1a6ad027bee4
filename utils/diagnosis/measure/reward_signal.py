"""Reward-signal statistics over a window of recent episodes.

The textbook statistics are kept and logged (coefficient of variation, now on |mean|,
since its formula breaks for negative rewards; the share of |z| > 3 steps; the trend
of the episode return), but the reward rules (utils/diagnosis/rules/reward_rules.py, which says
how each one uses them) judge statistics that separate healthy from broken signals:

- `penalty_share`: the share of the below-mean deviation mass carried by steps more
  than 6 standard deviations below the mean.
  It leaves out the last step of an episode that ended `terminated`: a crash penalty
  there (LunarLander's -100) is how many envs say that an episode failed, not a rare
  term buried in the per-step signal.
- `bonus_share`: the same for steps above the mean, every step counted: a goal bonus
  that ends the episode (MountainCar's +100) is the sparse reward it is there to note.
- `same_share`: the share of the window's steps whose reward is its most common value
  (the zeros of a reward paid only at the goal or the end).
- `length_r2`: the share of the episode returns' variance that the episodes' lengths
  explain: an alive bonus (MuJoCo's +1 per step a body stays up) pays one same reward
  at nearly every step, yet the return follows how long the agent keeps its episode
  going, which is a dense signal, not a sparse one.
- `cv`: std / |mean| over the window.
- `max_abs`, `median_abs`: the scale of the rewards; `max_abs` is the largest ever
  seen, not a window statistic.
- `typical_abs`: the median |r| of the non-zero rewards (a sparse reward's zeros do not
  make it small) that the random warm-up's actions earned (its first WARMUP_KEPT steps):
  the env's own scale, whatever the policy learns later, since a policy that learned
  to avoid action costs (MountainCarContinuous standing still) makes its rewards
  legitimately tiny. A run without a warm-up of MIN_WARMUP steps takes the largest of
  its episodes' instead; `typical_from_warmup` (1 or 0) says which.
- `terminated_share`: the share of the window's episodes that ended terminated;
  `terminations`: how many of the run's episodes did (the env can end an episode
  before its time limit).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

EXTREME_Z = 6.0
MIN_EPISODES = 5
WARMUP_KEPT = 10_000  # the warm-up's rewards kept for typical_abs
MIN_WARMUP = 50  # fewer warm-up steps: typical_abs from the episodes


def extreme_shares(rewards: np.ndarray) -> tuple[float, float]:
    """(penalty_share, bonus_share): the below- and above-mean deviation mass carried by
    steps more than EXTREME_Z standard deviations from the mean."""
    dev = rewards - rewards.mean() if rewards.size else rewards
    std = float(rewards.std()) if rewards.size else 0.0
    below, above = -dev[dev < 0].sum(), dev[dev > 0].sum()
    z = dev / std if std > 0 else np.zeros_like(dev)
    return (float(-dev[z < -EXTREME_Z].sum() / below) if below > 0 else 0.0,
            float(dev[z > EXTREME_Z].sum() / above) if above > 0 else 0.0)


def reward_stats(rewards: np.ndarray, returns: np.ndarray,
                 judged: np.ndarray | None = None) -> dict[str, float]:
    """Statistics of per-step `rewards` and per-episode `returns` (both 1-D); `judged`:
    the steps the penalty share looks at (None: all)."""
    r = rewards.astype(np.float64)
    mean, std = float(r.mean()), float(r.std())
    dev = r - mean
    z = dev / std if std > 0 else np.zeros_like(dev)
    penalty, bonus = extreme_shares(r)
    if judged is not None and not judged.all():
        penalty = extreme_shares(r[judged])[0]
    stats = {
        "mean": mean, "std": std, "cv": std / (abs(mean) + 1e-8),
        "spike_ratio": float(np.mean(np.abs(z) > 3.0)),
        "kurtosis": float(np.mean(z ** 4) - 3.0) if std > 0 else 0.0,
        "penalty_share": penalty, "bonus_share": bonus,
        "rms": float(np.sqrt(np.mean(r ** 2))),
        "same_share": float(np.unique(r, return_counts=True)[1].max() / r.size)
        if r.size else 0.0,
        **_middles(r),
        "trend": slope(returns),
    }
    return stats


def slope(values: np.ndarray) -> float:
    """The least-squares slope of `values` over their index (np.polyfit's of degree 1,
    in closed form: polyfit's solver costs about ten times more); 0 for fewer than 2."""
    n = len(values)
    if n < 2:
        return 0.0
    x = np.arange(n) - (n - 1) / 2
    return float(x @ (values - values.mean()) / (x @ x))


def length_r2(returns: np.ndarray, lengths: np.ndarray) -> float:
    """The share of the returns' variance their episodes' lengths explain (the squared
    correlation; 0 where the lengths or the returns do not vary): near 1 where a reward
    paid at every step the episode lasts (an alive bonus) carries the return."""
    if lengths.std() == 0 or returns.std() == 0:
        return 0.0
    return float(np.corrcoef(returns, lengths)[0, 1] ** 2)


def _middles(r: np.ndarray) -> dict[str, float]:
    """median_abs (the median |r|) and typical_abs (`typical_abs`) from one sort of |r|:
    its zeros come first, the non-zero rewards' sorted |r| after them."""
    ordered = np.sort(np.abs(r))
    n = ordered.size
    if n == 0:
        return {"median_abs": float("nan"), "typical_abs": 0.0}
    return {"median_abs": _middle(ordered),
            "typical_abs": _middle(ordered[np.count_nonzero(ordered == 0):])}


def _middle(ordered: np.ndarray) -> float:
    """The median of sorted values, as np.median gives it (0 where there are none)."""
    n = ordered.size
    if n == 0:
        return 0.0
    return float(ordered[n // 2]) if n % 2 else float((ordered[n // 2 - 1] + ordered[n // 2]) / 2)


def typical_abs(rewards: np.ndarray) -> float:
    """The median |r| of the non-zero rewards (0 when there are none)."""
    return _middle(np.sort(np.abs(rewards[rewards != 0])))  # np.median's overhead is larger


class RewardAnalyzer:
    """Keeps the per-step rewards of the last `window` episodes (bounded memory), each
    training env's episode in progress apart."""

    def __init__(self, window: int, num_envs: int = 1, warmup: int = 0) -> None:
        self.warmup = min(warmup, WARMUP_KEPT)  # the first steps, of random actions
        self.warmup_rewards: list[float] = []
        self.steps = 0
        self.episodes: deque[np.ndarray] = deque(maxlen=window)
        self.terminated: deque[bool] = deque(maxlen=window)  # each episode's ending
        # each kept episode's return (its float32 sum) and length, as `episodes` holds them
        self.sums: deque[np.float32] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self._current: list[list[float]] = [[] for _ in range(num_envs)]
        self.max_abs = 0.0  # the largest |reward| of the run
        self.episode_typical = 0.0  # the largest episode's typical |reward|
        self.unjudged = 0  # episodes kept since the statistics were last computed
        self.terminations = 0  # the run's episodes that ended terminated

    def add(self, reward: float, env: int = 0) -> None:
        self._current[env].append(reward)
        if self.steps < self.warmup and math.isfinite(reward):
            self.warmup_rewards.append(reward)
        self.steps += 1
        if math.isfinite(reward):  # at once: gradients are judged against it (gradients.py)
            self.max_abs = max(self.max_abs, abs(reward))

    def add_rows(self, rewards: list[float], envs: int) -> None:
        """`add` of each reward of several vector steps (row r: env r % envs's)."""
        for env in range(envs):
            self._current[env] += rewards[env::envs]
        for reward in rewards[:max(self.warmup - self.steps, 0)]:
            if math.isfinite(reward):
                self.warmup_rewards.append(reward)
        self.steps += len(rewards)
        finite = [abs(r) for r in rewards if math.isfinite(r)]
        if finite:
            self.max_abs = max(self.max_abs, max(finite))

    def end_episode(self, env: int = 0, terminated: bool = False) -> np.ndarray:
        rewards = np.asarray(self._current[env], dtype=np.float32)
        self._current[env] = []
        if rewards.size and np.isfinite(rewards).all():
            self.episodes.append(rewards)
            self.terminated.append(terminated)
            self.sums.append(rewards.sum())
            self.lengths.append(rewards.size)
            self.unjudged += 1
            self.terminations += terminated
            self.max_abs = max(self.max_abs, float(np.abs(rewards).max()))
            self.episode_typical = max(self.episode_typical, typical_abs(rewards))
        return rewards

    def typical(self) -> tuple[float, str]:
        """typical_abs and where it comes from ("warm-up" or "episodes")."""
        if (self.warmup >= MIN_WARMUP and self.steps >= self.warmup
                and len(self.warmup_rewards) >= MIN_WARMUP):
            return typical_abs(np.asarray(self.warmup_rewards)), "warm-up"
        return self.episode_typical, "episodes"

    def due_stats(self) -> dict[str, float] | None:
        """`stats()` once a tenth of the window's episodes are new since they were last
        computed (every episode while the window holds fewer than 20): each computation
        reads the whole window, so this keeps their cost per episode that of about ten
        episodes' rewards, however long the window. None when not due."""
        if self.unjudged < max(1, len(self.episodes) // 10):
            return None
        stats = self.stats()
        if stats is not None:
            self.unjudged = 0
        return stats

    def stats(self) -> dict[str, float] | None:
        if len(self.episodes) < min(MIN_EPISODES, self.episodes.maxlen or MIN_EPISODES):
            return None
        rewards = np.concatenate(self.episodes)
        returns = np.array(self.sums, dtype=np.float64)
        last_steps = np.cumsum(self.lengths) - 1
        judged = np.ones(len(rewards), dtype=bool)  # all but a terminated episode's last
        judged[last_steps[np.array(self.terminated, dtype=bool)]] = False
        typical, source = self.typical()
        lengths = np.array(self.lengths, dtype=np.float64)
        return {**reward_stats(rewards, returns, judged), "max_abs": self.max_abs,
                "typical_abs": typical, "typical_from_warmup": float(source == "warm-up"),
                "length_r2": length_r2(returns, lengths),
                "terminated_share": float(np.mean(self.terminated)),
                "terminations": float(self.terminations)}

    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"episodes": [torch.from_numpy(e.copy()) for e in self.episodes],
                "terminated": list(self.terminated),
                "current": [list(c) for c in self._current], "max_abs": self.max_abs,
                "episode_typical": self.episode_typical, "steps": self.steps,
                "unjudged": self.unjudged, "terminations": self.terminations,
                "warmup_rewards": torch.tensor(self.warmup_rewards, dtype=torch.float64)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episodes.clear()
        self.episodes.extend(t.numpy() for t in state["episodes"])
        self.sums.clear()
        self.sums.extend(e.sum() for e in self.episodes)
        self.lengths.clear()
        self.lengths.extend(e.size for e in self.episodes)
        endings = [bool(t) for t in state.get("terminated", ())]
        if len(endings) != len(self.episodes):  # not kept before: every step judged, as then
            endings = [False] * len(self.episodes)
        self.terminated.clear()
        self.terminated.extend(endings)
        current = state["current"]
        if current and not isinstance(current[0], list):  # saved before num_envs: one env
            current = [current]
        self._current = [list(c) for c in current] or [[] for _ in self._current]
        self.max_abs = float(state["max_abs"])
        # Not kept before: the window's episodes, and no warm-up judged.
        kept = [typical_abs(e) for e in self.episodes]
        self.episode_typical = float(state.get("episode_typical", max(kept, default=0.0)))
        self.steps = int(state.get("steps", self.warmup))
        self.unjudged = int(state.get("unjudged", 1))  # not kept before: judged every episode
        # Not kept before: the window's.
        self.terminations = int(state.get("terminations", sum(self.terminated)))
        warm = state.get("warmup_rewards")
        self.warmup_rewards = [] if warm is None else [float(x) for x in warm.tolist()]
        if "steps" not in state:
            self.warmup = 0
