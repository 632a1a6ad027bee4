"""Does the action change anything? The `ignored_action` rule's statistic.

An env that ignores the agent's action (a wrapper that drops it, an action scaled to
nothing, actions sent to another env of a vector) gives every other rule a plausible
run: rewards vary, observations move, gradients flow, and nothing is learned.

The warm-up's actions (uniformly random, `learning_starts` env steps) are independent of
the state, so there is a clean test: if the env ignored them, every product of an action
(centred) with anything that follows it sums to about zero. For each action dimension,
as it is and as its distance from the mean (an effect that depends only on how hard the
agent pushes), this sums its products with each observation dimension's change and with
the reward, at the same step and up to MAX_LAG steps later (an action that shows a few
steps late: through a velocity the observation leaves out, a lagging sensor), and with
those changes times each observation dimension of the state
they happened in (an effect that depends on the state: thrust along a heading, a reward
of action times context); with several action dimensions, each pair's product too
(dimensions that act only together: a push a0 in a direction a1). What the state was
already doing is fitted out of the changes first by least squares: the observation at
the action's step and its change over the step before (`_history`). These are functions
of the past, independent of the random action, so the test stays valid; and they take
out the part of the changes that the state's own motion explains, so the action's part
stands out (on 1000 random Pendulum steps: 3.1 -> 10.1; with the velocity left out of
the observation 1.0, which read as an ignored action, -> 2.3). Each sum over its
own scale, sqrt(sum of the other factor squared), is about standard normal when the
action is ignored, whatever the env's own distribution, so the strongest of P such
sums falls near sqrt(2 ln 2P) by chance alone. The statistic is each action dimension's
strongest sum in those units: about 1 or below when the dimension is ignored, several
when it is used (`benchmarks/input_stats.py --action-effect`). A used dimension's
statistic grows with sqrt(rows) while chance's stays near 1, so it is judged on the
newest MAX_ROWS warm-up transitions where the warm-up has them, and not on fewer than
ROWS: an env whose actions act only part of the time (LunarLander's main engine fires
only for a positive throttle) scored 1.35-3.25 on 1000 rows over 20 seeds, 3.44-5.46 on
5000, chance at most 0.99.

After a warm-up too short to judge, the policy explores with a = mu(s) + noise, the
noise drawn independently of the env: the same test holds with the noise in place of the
random action (`noise`), on the first ROWS steps where the policy's action left the
noise room to act (utils/training/exploration.py `drawn`: a choice by the state, with
the noise clipped symmetrically as the bounds clipped it, so it stays independent of
the env; SB3's SAC also drops the rare steps whose tanh saturated, a choice by the
noise that can only make an ignored action look used, never the reverse). The
noise is small beside what the state decides of the action (the policy's action, the
rest of an OU process), so that part (`controls`, with the observation) is fitted out of
the changes by least squares first; the sums stay about standard normal when the action
is ignored, since the controls are independent of the noise. Measured with
`python -m benchmarks.noise_effect` (one seed each, docs/diagnosing.md has the table):
healthy runs scored 6.18-9.97 where judged (Pendulum DDPG gaussian 0.3 and SAC,
MountainCar TD3 OU 0.5, LunarLander TD3 gaussian 0.3), dropped actions 0.62-0.85; but
LunarLander with gaussian 0.1 scored 1.08, a false alarm (its engines ignore small
pushes), hence inputs.MIN_NOISE: smaller added noise is not judged by.

An observation dimension that repeats the action (a "last action" input, |correlation|
above ECHO) is no evidence that the env applied it: such dimensions are left out. A
nonlinear or later copy (tanh(a), a squared, the action of the step before) is not
recognised and counts as an effect.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rltrain.utils.diagnosis.rules.input_rules import MAX_LAG
from rltrain.utils.training.replay_buffer import Batch

ROWS = 1000  # a shorter warm-up is not judged
MAX_ROWS = 5000  # the newest warm-up transitions judged, where there are that many
ECHO = 0.999  # an observation this correlated with an action dimension repeats it


def _standardised(x: torch.Tensor) -> torch.Tensor:
    """Columns at mean 0 and standard deviation 1; a constant column is all zeros."""
    x = x - x.mean(dim=0)
    std = x.square().mean(dim=0).sqrt()
    return torch.where(std > 0, x / std.clamp_min(torch.finfo(x.dtype).tiny), 0.0)


def _sums(features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """[F, W]: sum over rows of each standardised feature times each weight, over
    sqrt(sum of that weight squared): about N(0, 1) when the features are independent
    of the weights (they are random actions, the weights what follows them)."""
    scale = weights.square().sum(dim=0).sqrt()
    return torch.where(scale > 0, features.T @ weights / scale.clamp_min(1e-30), 0.0)


def _continuing(batch: Batch, stride: int) -> torch.Tensor:
    """[N - stride] bools: row i's episode goes on at row i + stride (the same env's next
    transition when `stride` envs add their rows in turn): its next_obs is that row's obs.
    False across an episode's end, and where a refused transition broke the order."""
    return (batch.next_obs[:-stride] == batch.obs[stride:]).all(dim=1)


def _history(batch: Batch, continuing: torch.Tensor, stride: int) -> torch.Tensor:
    """[N, 2 obs_dim]: each row's observation and its change over the step before it
    (zero where the row starts an episode). Functions of the past, independent of the
    row's own random action: fitting them out keeps the sums standard normal for an
    ignored action, and shows the action's effect on an observation that hides part of
    the state (a velocity, whose change the steps before tell)."""
    obs = batch.obs.double()
    before = torch.zeros_like(obs)
    if len(obs) > stride:
        moved = obs[stride:] - obs[:-stride]
        before[stride:] = torch.where(continuing[:, None], moved, 0.0)
    return torch.cat([obs, before], dim=1)


def echoes(batch: Batch) -> list[int]:
    """Observation dimensions whose next value repeats an action dimension."""
    corr = _standardised(batch.next_obs.double()).T @ _standardised(batch.actions.double())
    return (corr.abs() / len(batch.actions) > ECHO).any(dim=1).nonzero().flatten().tolist()


class _Strongest:
    """Each action dimension's strongest sum, and what it was with."""

    def __init__(self, width: int) -> None:
        self.z = [0.0] * width
        self.pairs = [0] * width
        self.where: list[dict[str, Any]] = [{} for _ in range(width)]

    def add(self, dim: int, sums: torch.Tensor, describe: Any) -> None:
        """`sums` [K, W] for action dimension `dim`; describe(k, w) names pair (k, w)."""
        self.pairs[dim] += sums.numel()
        flat = int(sums.abs().argmax())
        z = abs(float(sums.flatten()[flat]))
        if z > self.z[dim]:
            self.z[dim], self.where[dim] = z, describe(*divmod(flat, sums.shape[1]))

    def effects(self) -> list[float]:
        return [round(z / math.sqrt(2 * math.log(2 * max(p, 1))), 4)
                for z, p in zip(self.z, self.pairs, strict=True)]


def _features(actions: torch.Tensor, centred: torch.Tensor,
              pairs: list[tuple[int, int]]) -> torch.Tensor:
    """Each dimension as it is, as its distance from the mean, and, for dimensions that
    act only together (a0 * a1), each pair's product."""
    return torch.cat([actions, centred.abs(),
                      *[centred[:, [k]] * centred[:, [m]] for k, m in pairs]], dim=1)


def _residuals(changes: torch.Tensor, controls: torch.Tensor | None) -> torch.Tensor:
    """`changes` centred, or, with `controls` (functions of the state: the observation and
    the action the policy chose before its noise), what least squares on them leaves."""
    changes = changes - changes.mean(dim=0)
    if controls is None:
        return changes
    x = controls - controls.mean(dim=0)
    fit = torch.linalg.lstsq(x, changes, driver="gelsd").solution
    return changes - x @ fit


@torch.no_grad()
def action_effect(batch: Batch, stride: int = 1, noise: torch.Tensor | None = None,
                  controls: torch.Tensor | None = None) -> dict[str, Any]:
    """The statistic above for random-action transitions in the order they were taken
    (`stride`: training envs); or, with `noise` [N, action_dim] (exploration noise drawn
    independently of the env, in place of the random actions), for the policy's
    transitions, with `controls` [N, C] (what the state decided of each action) fitted
    out of the changes first. Returns `action_effect` (the strongest dimension's) and
    `per_dimension`; the strongest sum (`z`, in standard-normal units, before the division) and
    what it was of (`target`: "observation K" or "reward", `action`, `lag`, `as`); `rows`;
    the `echoes` left out; and whether any observation changed at all
    (`observations_moved`)."""
    actions = (batch.actions if noise is None else noise).double()
    n, width = actions.shape
    controls = None if controls is None else controls.double()
    echoed = echoes(batch)
    kept = [j for j in range(batch.obs.shape[1]) if j not in echoed]
    changes = torch.cat([batch.next_obs.double()[:, kept] - batch.obs.double()[:, kept],
                         batch.rewards.double()], dim=1)  # [N, targets]
    names = [f"observation {j}" for j in kept] + ["reward"]
    centred = actions - actions.mean(dim=0)
    pairs = [(k, m) for k in range(width) for m in range(k + 1, width)]
    features = _features(actions, centred, pairs)
    best = _Strongest(width)
    continuing = _continuing(batch, stride) if n > stride else torch.zeros(0, dtype=torch.bool)
    history = _history(batch, continuing, stride)
    keep = torch.ones(n, dtype=torch.bool)
    for lag in range(MAX_LAG + 1):
        shift = lag * stride
        if lag:  # the whole chain from the action to the change stays in one episode
            start = (lag - 1) * stride
            keep = keep[:n - shift] & continuing[start:start + n - shift]
        if int(keep.sum()) < 2:
            break
        taken = features[:n - shift][keep]
        # Fitted out: what the state decided (`controls`, at the change's row), and the
        # state's own motion before the action (at the action's row).
        fitted = [history[:n - shift][keep]]
        if controls is not None:
            fitted.append(controls[shift:][keep])
        later = _residuals(changes[shift:][keep], torch.cat(fitted, dim=1))
        sums = _sums(_standardised(taken), later)
        for dim in range(width):
            best.add(dim, sums[[dim, width + dim]], lambda k, w, lag=lag, dim=dim: {
                "target": names[w], "action": dim, "lag": lag,
                "as": "value" if k == 0 else "distance from mean"})
        for row, (k, m) in enumerate(pairs, start=2 * width):  # counts for both
            for dim in (k, m):
                best.add(dim, sums[[row]], lambda _, w, lag=lag, k=k, m=m: {
                    "target": names[w], "action": k, "lag": lag,
                    "as": f"value x action {m}"})
        # Not the echoes: one step later an echo is the action itself, not the state.
        _add_state_dependent(best, taken[:, :width], batch.obs[shift:][keep][:, kept],
                             later, [f"observation {j}" for j in kept], names, lag)
    effects = best.effects()
    strongest = max(range(width), key=lambda d: effects[d])
    moved = bool((batch.next_obs != batch.obs).any())  # else frozen_observation's case
    return {"action_effect": effects[strongest], "per_dimension": effects, "rows": n,
            "z": round(best.z[strongest], 2), **best.where[strongest], "echoes": echoed,
            "observations_moved": moved}


def _add_state_dependent(best: _Strongest, actions: torch.Tensor, obs: torch.Tensor,
                         changes: torch.Tensor, obs_names: list[str], names: list[str],
                         lag: int) -> None:
    """Sums of each action dimension with a change times an observation dimension of the
    state the change happened in (`obs`, `lag` steps after the action). float32: at most
    1000 x obs_dim x (obs_dim + 1) products per action dimension and lag (Humanoid: 0.1 G)."""
    obs = _standardised(obs.double()).float()
    changes = _standardised(changes).float()  # sums are scale-free: no float32 overflow
    scale = (obs.square().T @ changes.square()).sqrt()  # [obs_dim, targets]
    for dim in range(actions.shape[1]):
        action = _standardised(actions[:, dim:dim + 1]).float()
        sums = torch.where(scale > 0, (action * obs).T @ changes / scale.clamp_min(1e-30), 0.0)
        best.add(dim, sums.double(), lambda j, w, dim=dim: {
            "target": names[w], "action": dim, "lag": lag, "as": f"value x {obs_names[j]}"})
