"""Does the observation hold the state? The `partial_observability` rule's statistics.

An observation that holds the state makes the next observation and the reward functions
of it and the action (up to the env's own noise): what happened before adds nothing. One
that leaves part of the state out (a velocity the sensors do not give, a lagging
sensor, a noisy one) does not: the steps before carry what it leaves out, so they
predict the next observation (or the reward) better. That is the test, on the replay
buffer's newest transitions in the order they were taken:

- model 1 predicts each step's observation change next_obs - obs (and, apart, the
  reward) from the observation and the action;
- model 2 from those and the `HISTORY` steps before (their observations and actions),
  within one episode;
- `history_gain`: the share of what model 1 leaves unexplained (on held-out rows) that
  model 2 explains: near 0 for an observation that holds the state, large where the past
  fills in what it leaves out. `reward_gain` the same for the reward (a terminated
  step's reward, a crash or a goal bonus, is left out: the env pays it for an event of
  its own), and `reward_unexplained`: the share of the reward's variance model 2 still
  leaves (a reward the agent cannot predict at all: a noisy one).

Both models are ridge regressions on the same number of random Fourier features of the
standardised inputs (Rahimi and Recht, 2007), so that neither is favoured by its size;
every other block of `BLOCK` rows is held out. The action's effect (action_effect.py)
is a different question, and this one keeps it apart: an observation that hides what
the action did is partial, not an ignored action.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from rltrain.utils.config.schema import training_envs
from rltrain.utils.diagnosis.rules import partial_observability
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import Batch, ReplayBuffer

HISTORY = 3  # steps before the current one that model 2 sees
FEATURES = 256  # random Fourier features per model
BLOCK = 100  # rows per block of the train/held-out split
RIDGE = 1e-3  # ridge penalty, relative to the features' mean square
MIN_ROWS = 1000  # rows with a whole history, at least


def _standardised(x: torch.Tensor) -> torch.Tensor:
    x = x - x.mean(dim=0)
    std = x.std(dim=0)
    return torch.where(std > 0, x / std.clamp_min(1e-12), 0.0)


def _fourier(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """[N, FEATURES + columns + 1]: random Fourier features of the standardised `x`
    (bandwidth sqrt(columns)), its columns themselves and a constant."""
    z = _standardised(x)
    width = z.shape[1]
    w = torch.randn(width, FEATURES, generator=generator, dtype=torch.float64)
    b = 2 * math.pi * torch.rand(FEATURES, generator=generator, dtype=torch.float64)
    # cos(z w / sqrt(width) + b) sqrt(2 / FEATURES), in place: one [N, FEATURES] buffer
    # instead of one per operation (4,000 rows of float64: 8 MiB each)
    features = (z @ w).div_(math.sqrt(max(width, 1))).add_(b).cos_().mul_(
        math.sqrt(2.0 / FEATURES))
    return torch.cat([features, z, torch.ones(len(z), 1, dtype=torch.float64)], dim=1)


def _unexplained(x: torch.Tensor, y: torch.Tensor, train: torch.Tensor) -> float:
    """The share of y's held-out variance (summed over columns) a ridge fit on x leaves."""
    xt, yt = x[train], y[train]
    gram = xt.T @ xt
    penalty = RIDGE * gram.diagonal().mean() * torch.eye(len(gram), dtype=x.dtype)
    coef = torch.linalg.solve(gram + penalty, xt.T @ yt)
    held = ~train
    residual = y[held] - x[held] @ coef
    total = (y[held] - yt.mean(dim=0)).square().sum()
    return float(residual.square().sum() / total) if total > 0 else float("nan")


def _with_history(batch: Batch, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows that have HISTORY steps of their own episode before them (indices into the
    batch), and each one's inputs from those steps [N, HISTORY * (obs + action)]."""
    steps = torch.cat([batch.obs, batch.actions], dim=1).double()
    n = len(steps)
    chained = torch.zeros(n, dtype=torch.bool)  # row i continues row i - stride
    chained[stride:] = (batch.next_obs[:-stride] == batch.obs[stride:]).all(dim=1)
    index = torch.arange(n)
    valid = index >= HISTORY * stride
    for j in range(HISTORY):
        valid &= chained[(index - j * stride).clamp_min(0)]
    rows = index[valid]
    past = [steps[rows - k * stride] for k in range(1, HISTORY + 1)]
    return rows, torch.cat(past, dim=1) if past else steps[rows][:, :0]


@torch.no_grad()
def observability(batch: Batch, stride: int, seed: int) -> dict[str, Any] | None:
    """The statistics above for `batch` (transitions in the order they were taken,
    `stride` training envs adding rows in turn); None with fewer than MIN_ROWS rows
    that have a whole history."""
    rows, past = _with_history(batch, stride)
    if len(rows) < MIN_ROWS:
        return None
    obs, actions = batch.obs.double()[rows], batch.actions.double()[rows]
    change = (batch.next_obs.double() - batch.obs.double())[rows]
    reward = batch.rewards.double()[rows]
    train = (torch.arange(len(rows)) // BLOCK) % 2 == 0
    now = torch.cat([obs, actions], dim=1)
    stats: dict[str, Any] = {"rows": len(rows)}
    for name, target, inputs, keep in (
            ("", change, now, torch.ones(len(rows), dtype=torch.bool)),
            ("reward_", reward, torch.cat([now, change], dim=1),
             batch.terminated.double()[rows][:, 0] == 0)):
        generator = torch.Generator().manual_seed(seed)
        first = _unexplained(_fourier(inputs[keep], generator), target[keep], train[keep])
        generator = torch.Generator().manual_seed(seed)
        second = _unexplained(_fourier(torch.cat([inputs, past], dim=1)[keep], generator),
                              target[keep], train[keep])
        gain = (first - second) / first if first > 0 else 0.0
        stats[f"{name}unexplained"] = round(second, 4)
        stats[f"{'reward_' if name else 'history_'}gain"] = round(gain, 4)
    return stats


class ObservabilityChecks:
    """The statistics above, on the buffer's newest `ROWS` transitions, once it holds
    that many and every `every_updates` updates after; logged (flow1.jsonl's
    "observability" lines) and handed to the rule (utils/diagnosis/rules/
    partial_observability.py), whose findings `report` takes."""

    ROWS = 4000

    def __init__(self, context: RuleContext, buffer: ReplayBuffer, logger: RunLogger,
                 report: Callable[[list[Finding]], None], seed: int) -> None:
        self.buffer, self.logger, self.report, self.seed = buffer, logger, report, seed
        self.stride = training_envs(context.config)
        self.rule = partial_observability.PartialObservability(context)
        self.last: int | None = None  # the update of the newest measurement

    def after_update(self, env_steps: int, updates: int) -> None:
        every = self.rule.settings.every_updates
        full = len(self.buffer) >= min(self.ROWS, self.buffer.capacity)
        if (self.rule.rule.action == "off" or not full
                or (self.last is not None and updates - self.last < every)):
            return
        self.last = updates
        stats = observability(self.buffer.newest(self.ROWS), self.stride, self.seed)
        if stats is None:
            return
        self.logger.diagnostic("observability", env_steps, **stats)
        self.report(self.rule.check(env_steps, stats))

    def unjudged(self) -> dict[str, str]:
        if self.rule.rule.action == "off" or self.last is not None:
            return {}
        return {self.rule.spec.name: f"{len(self.buffer)} of the {self.ROWS} transitions it "
                                     "needs in the replay buffer"}

    def state_dict(self) -> dict[str, Any]:
        return {"last": self.last}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last = state["last"]
