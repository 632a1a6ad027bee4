"""The statistics of `rltrain diagnose --verify`: which evaluations are compared, the
difference fix - control with its 95% bootstrap interval, and the verdict.

A fix is judged on where the branches end up, not on the whole path after the fork: the
last `last` evaluation steps that both branches reached (default: the last third of
them, at least one). The early evaluations come before a fix can show: an agent that
explores more has not found the goal yet, a smaller learning rate has not yet undone
the damage. Averaging them in would dilute a real gain (and flatter a fix whose gain
fades away).

With K re-seeded pairs, the difference is the mean of the pairs' differences; its
interval resamples the pairs and, within each pair, each branch's episodes, so that it
holds both the spread between seeds and within one. With one pair this is the plain
bootstrap over the episodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MARGIN = 0.05  # a gain below this share of the control's |mean return| is no gain
CONFIRM = 0.2  # a confirmed fix beats the control by more than this share of its |mean|
BOOTSTRAP = 2000
SHARE = 3  # by default the last 1/SHARE of the evaluations are compared

Evaluations = list[tuple[int, list[float]]]  # (env steps, episode returns), by step


def common_steps(branches: list[Evaluations]) -> list[int]:
    """The evaluation steps every branch reached, in order."""
    return sorted(set.intersection(*({step for step, _ in b} for b in branches)))


def compared_steps(common: list[int], last: int | None) -> list[int]:
    """The last `last` of the common evaluation steps (None: the last third, at least
    one; all of them when there are fewer)."""
    keep = max(1, len(common) // SHARE) if last is None else last
    return common[-keep:] if common else []


def returns_at(evaluations: Evaluations, steps: list[int]) -> list[float]:
    """The episode returns of the evaluations at these steps."""
    wanted = set(steps)
    return [r for step, returns in evaluations if step in wanted for r in returns]


def _draws(rng: np.random.Generator, fix: list[float], base: list[float]) -> np.ndarray:
    a, b = np.asarray(fix, float), np.asarray(base, float)
    return (rng.choice(a, (BOOTSTRAP, a.size)).mean(1)
            - rng.choice(b, (BOOTSTRAP, b.size)).mean(1))  # [BOOTSTRAP]


def pooled_difference(pairs: list[tuple[list[float], list[float]]],
                      seed: int = 0) -> dict[str, Any]:
    """The mean over pairs of mean(fix) - mean(base), each pair's difference and the 95%
    bootstrap interval over pairs x episodes."""
    rng = np.random.default_rng(seed)
    draws = np.stack([_draws(rng, fix, base) for fix, base in pairs], 1)  # [BOOTSTRAP, K]
    pick = rng.integers(len(pairs), size=draws.shape)  # the pairs, resampled per draw
    low, high = np.percentile(np.take_along_axis(draws, pick, 1).mean(1), [2.5, 97.5])
    each = [float(np.mean(fix) - np.mean(base)) for fix, base in pairs]
    return {"difference": float(np.mean(each)), "low": float(low), "high": float(high),
            "pairs": each}


def difference(fix: list[float], base: list[float], seed: int = 0) -> dict[str, float]:
    """Mean(fix) - mean(base) and its 95% bootstrap interval over the episodes."""
    found = pooled_difference([(fix, base)], seed)
    return {k: found[k] for k in ("difference", "low", "high")}


def verdict(diff: dict[str, float], base_mean: float) -> str:
    """Confirmed: the interval lies above 0 and the fix beats the control by more than
    CONFIRM of the control's |mean return| (a gain that matters, not only one that is
    there); not confirmed: the interval lies below a gain of MARGIN of it; else
    inconclusive."""
    if diff["low"] > 0 and diff["difference"] > CONFIRM * abs(base_mean):
        return "confirmed"
    if diff["high"] < MARGIN * max(abs(base_mean), 1e-9):
        return "not confirmed"
    return "inconclusive"
