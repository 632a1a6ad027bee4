"""Statistics of the reward's terms over a window of recent episodes.

Where the env reports the terms of its reward in `info` (utils/training/reward_terms.py),
each episode's end carries its sum of every term. Over the newest `window_size`
episodes with terms, per term:

- `mean`, `std`: its sum per episode (std over the episodes, numpy's population std);
- `size`: the mean of its sum's absolute value per episode: how much it pays or costs
  an episode, whichever way. For a term of one sign (a cost, an alive bonus) that is
  |mean|; a term of both signs is larger than its mean says: a walker's forward reward
  early in training, negative as it falls backwards and positive as it hops on, has a
  window mean near 0 as it turns positive, and Hopper's alive bonus looked like 98% of
  the return then (a healthy run, step 3,377);
- `share`: `size` over the sum of every term's `size`: how much of the return it makes;
- `corr`: the Pearson correlation of its per-episode sums with the episode returns,
  over the window's episodes the policy played (begun at `learning_starts` or later:
  a random warm-up's returns follow whatever its random actions cost, not what the
  agent learns); None where either does not vary or fewer than 2 were played;
- `played`: how many of the window's episodes the policy played;
- `start`, `recent`: its mean sum per episode over the run's first `ENDS` episodes with
  terms (with `learning_starts`, the random warm-up's) and over the newest `ENDS`:
  what the agent has done to the term since it started (None before it has any).

A term an episode did not report counts as 0 in it. The `reward_terms` rule
(utils/diagnosis/rules/reward_terms.py) judges these; the flow-1 hook writes them to TensorBoard
(`reward_terms/<term>/share`, `/corr`, `/mean`, `/std`) and flow1.jsonl, where
`rltrain diagnose` finds the table of terms.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

MIN_EPISODES = 5  # episodes with terms before their statistics are logged
ENDS = 3  # episodes at the run's start, and newest, that `start` and `recent` average

TermStats = dict[str, dict[str, Any]]  # term -> {mean, std, size, share, corr, ...}


def term_stats(episodes: list[dict[str, float]], returns: list[float],
               first: list[dict[str, float]] | None = None,
               played: list[bool] | None = None) -> TermStats:
    """The statistics of each term over `episodes` (each a term -> sum mapping) against
    the episodes' `returns`; `start` over `first` (the run's first episodes with terms);
    `corr` over the episodes `played` marks (all where None)."""
    names = sorted({name for terms in episodes for name in terms})
    sums = _sums(episodes, names)  # [E, T]
    start = _sums(first, names).mean(axis=0) if first else None
    recent = sums[-ENDS:].mean(axis=0)
    returns_ = np.asarray(returns, dtype=np.float64)
    by_policy = np.ones(len(episodes), bool) if played is None else np.asarray(played, bool)
    means, stds = sums.mean(axis=0), sums.std(axis=0)
    sizes = np.abs(sums).mean(axis=0)
    total = float(sizes.sum())
    stats: TermStats = {}
    for i, name in enumerate(names):
        stats[name] = {"mean": float(means[i]), "std": float(stds[i]),
                       "size": float(sizes[i]),
                       "share": float(sizes[i] / total) if total > 0 else 0.0,
                       "corr": _pearson(sums[by_policy, i], returns_[by_policy]),
                       "played": int(by_policy.sum()),
                       "start": None if start is None else float(start[i]),
                       "recent": float(recent[i])}
    return stats


def _sums(episodes: list[dict[str, float]], names: list[str]) -> np.ndarray:
    """[episodes, terms]: each episode's sum of each term (0 where it did not report it)."""
    return np.array([[terms.get(n, 0.0) for n in names] for terms in episodes],
                    dtype=np.float64).reshape(len(episodes), len(names))


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


class TermWindow:
    """The newest `window` episodes' term sums and returns, the run's first `ENDS`
    episodes' term sums, and how many episodes ended with and without terms (an env that
    reports none is said so, not waited on)."""

    def __init__(self, window: int) -> None:
        self.terms: deque[dict[str, float]] = deque(maxlen=window)
        self.played: deque[bool] = deque(maxlen=window)  # begun at learning_starts or later
        self.first: list[dict[str, float]] = []
        self.returns: deque[float] = deque(maxlen=window)
        self.without = 0  # episodes that ended without terms

    def add(self, terms: dict[str, float] | None, episode_return: float,
            played: bool = True) -> bool:
        """Keep one episode's terms (`played`: the policy acted in it, not a random
        warm-up); False (and counted) when it had none."""
        if not terms:
            self.without += 1
            return False
        self.terms.append(dict(terms))
        self.returns.append(float(episode_return))
        self.played.append(bool(played))
        if len(self.first) < ENDS:
            self.first.append(dict(terms))
        return True

    def stats(self) -> TermStats | None:
        if len(self.terms) < min(MIN_EPISODES, self.terms.maxlen or MIN_EPISODES):
            return None
        return term_stats(list(self.terms), list(self.returns), self.first, list(self.played))

    def state_dict(self) -> dict[str, Any]:
        return {"terms": [dict(t) for t in self.terms], "returns": list(self.returns),
                "first": [dict(t) for t in self.first], "played": list(self.played),
                "without": self.without}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.terms.clear()
        self.terms.extend({str(k): float(v) for k, v in t.items()} for t in state["terms"])
        self.returns.clear()
        self.returns.extend(float(r) for r in state["returns"])
        self.without = int(state["without"])
        self.played.clear()  # saved before it was kept: every episode counts as played
        self.played.extend(bool(p) for p in state.get("played", [True] * len(self.terms)))
        # saved before `first` was kept: the oldest episodes in the window stand for it
        first = state.get("first", state["terms"][:ENDS])
        self.first = [{str(k): float(v) for k, v in t.items()} for t in first]


def scalars(stats: TermStats) -> dict[str, float]:
    """The TensorBoard scalars of the statistics (an undefined correlation left out)."""
    values = {}
    for name, s in stats.items():
        for key in ("share", "mean", "std", "corr"):
            if s[key] is not None:
                values[f"reward_terms/{name}/{key}"] = s[key]
    return values
