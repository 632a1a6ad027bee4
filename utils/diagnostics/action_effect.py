"""Does the action change anything? The `ignored_action` rule's statistic.

An env that ignores the agent's action (a wrapper that drops it, an action scaled to
nothing, actions sent to another env of a vector) gives every other rule a plausible
run: rewards vary, observations move, gradients flow, and nothing is learned.

The warm-up's actions (uniformly random, `learning_starts` env steps) are independent of
the state, so there is a clean test: if the env ignored them, each action would be
uncorrelated with everything that follows it. For every action dimension, as it is and
as its distance from the mean (an effect that depends only on how hard the agent
pushes), this takes the correlation with each observation dimension's change and with
the reward, at the same step and up to MAX_LAG steps later (an action that shows one
step late). Under independence each such correlation times sqrt(rows) is about standard
normal, whatever the env's own distribution, so the strongest of the P pairs falls near
sqrt(2 ln 2P) by chance alone. The statistic is the strongest correlation in those units:
about 1 or below when the action is ignored (0.38-1.00 for twelve Gymnasium envs with
the action dropped or the actions shuffled), 3.0-11 when it is used, also one step late
(`benchmarks/input_stats.py --action-effect`). It grows with sqrt(rows): below
MIN_ROWS warm-up transitions, Pendulum's real effect would not stand clear of chance.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rltrain.utils.replay_buffer import Batch

MAX_LAG = 2  # an action may first show this many steps after it was taken
MIN_ROWS = 500  # fewer warm-up transitions are not judged (Pendulum: 2.2-3.9 at 500)


def _standardised(x: torch.Tensor) -> torch.Tensor:
    """Columns at mean 0 and standard deviation 1; a constant column is all zeros."""
    x = x - x.mean(dim=0)
    std = x.square().mean(dim=0).sqrt()
    return torch.where(std > 0, x / std.clamp_min(torch.finfo(x.dtype).tiny), 0.0)


def _continuing(batch: Batch, stride: int) -> torch.Tensor:
    """[N - stride] bools: row i's episode goes on at row i + stride (the same env's next
    transition when `stride` envs add their rows in turn): its next_obs is that row's obs.
    False across an episode's end, and where a refused transition broke the order."""
    return (batch.next_obs[:-stride] == batch.obs[stride:]).all(dim=1)


@torch.no_grad()
def action_effect(batch: Batch, stride: int = 1) -> dict[str, Any]:
    """The statistic above for random-action transitions in the order they were taken
    (`stride`: training envs). Returns `action_effect`, the strongest pair's
    `correlation`, what it was with (`target`: "observation K" or "reward", `action`,
    `lag`, `as`: "value" or "distance from mean"), `rows`, and whether any observation
    changed at all (`observations_moved`)."""
    actions = batch.actions.double()
    features = _standardised(torch.cat([actions, (actions - actions.mean(dim=0)).abs()], 1))
    changes = torch.cat([batch.next_obs.double() - batch.obs.double(),
                         batch.rewards.double()], dim=1)  # [N, obs_dim + 1]
    n, width = len(actions), actions.shape[1]
    continuing = _continuing(batch, stride) if n > stride else torch.zeros(0, dtype=torch.bool)
    keep = torch.ones(n, dtype=torch.bool)
    best: dict[str, Any] = {"z": 0.0}
    pairs = 0
    for lag in range(MAX_LAG + 1):
        shift = lag * stride
        if lag:  # the whole chain from the action to the change stays in one episode
            start = (lag - 1) * stride
            keep = keep[:n - shift] & continuing[start:start + n - shift]
        rows = int(keep.sum())
        if rows < 2:
            break
        corr = _standardised(features[:n - shift][keep]).T @ \
            _standardised(changes[shift:][keep]) / rows  # [2 * action_dim, obs_dim + 1]
        pairs += corr.numel()
        strongest = int(corr.abs().argmax())
        z = abs(float(corr.flatten()[strongest])) * math.sqrt(rows)
        if z > best["z"]:
            feature, target = divmod(strongest, corr.shape[1])
            best = {"z": z, "correlation": round(float(corr.flatten()[strongest]), 4),
                    "target": ("reward" if target == changes.shape[1] - 1
                               else f"observation {target}"),
                    "action": feature % width, "lag": lag,
                    "as": "value" if feature < width else "distance from mean"}
    chance = math.sqrt(2 * math.log(2 * max(pairs, 1)))
    moved = bool((changes[:, :-1] != 0).any())  # else frozen_observation's case, not this
    return {"action_effect": round(best.pop("z") / chance, 4), "rows": n,
            "observations_moved": moved, **best}
