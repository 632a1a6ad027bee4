"""How well the networks do their own jobs, measured on the newest transitions: does the
critic fit its targets, and does the actor pick what its critic values most?

- The critic's fit: on the newest `ROWS` transitions of the replay buffer, the one-step
  targets y = r + gamma (1 - terminated) Q(s', pi(s')) of the critic and actor as they
  are now, and the share of their variance that Q(s, a) explains: 1 - Var(y - Q) /
  Var(y). A critic that can fit its targets brings this near 1 as it learns (the
  targets move with it, but a step at a time); one that cannot (too few units, a rate
  too low to move its weights, a target that is noise: a noisy reward, a state the
  observation does not hold) stays far under it. Online networks, not the target
  networks: every algorithm has them, and a plain loop need not hand its targets on.
- What of the same targets can be fitted at all: a plain regression (random Fourier
  features of the standardised state and action, ridge-fitted) trained on some blocks
  of those transitions and scored on others it never saw, beside the critic's share on
  those same rows. A critic that leaves several times the regression's unexplained
  share lacks what the targets need (units, or a rate that moves it); targets that hold
  noise or a state the observation lacks defeat the regression too, so the two tell
  capacity from unpredictability.
- The actor's rank: on `STATES` of those transitions' states, where the critic puts the
  actor's deterministic action among `CANDIDATES` actions drawn uniformly over the
  action box (a fixed-seed stream of its own): the share of the candidates it values
  less (ties count half). An actor that follows its critic's gradient sits near the top
  (1.0); one that cannot reach the critic's best actions (too small, too slow, its
  steps clipped away) stays in the middle; one that descends its critic (a loss of the
  wrong sign) sits at the bottom. `action_spread` (the candidates' Q std over the
  critic's targets' std) says whether the critic tells the actions apart at all: where
  it does not, the rank says nothing.

Both read the networks under `torch.no_grad()` and draw nothing from the run's random
streams: a run with them learns exactly what it learns without them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from rltrain.utils.diagnosis.rules import fit_rules
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import Batch, ReplayBuffer

ROWS = 2048  # newest transitions the critic's fit is measured on
STATES = 256  # of them, the states the actor's rank is measured on
CANDIDATES = 32  # uniform actions per state the actor's action is ranked among
CHUNK = 1024  # (state, action) rows the critic values at once
FEATURES = 256  # random Fourier features of the reference regression
BLOCKS = 16  # time blocks of the rows: by index mod 4, 0-1 fit, 2 choose, 3 score
WIDTHS = (0.25, 0.5, 1.0)  # kernel widths tried, times sqrt(input dims) (standardised)
RIDGES = (1e-4, 1e-2, 1.0)  # ridge penalties tried, times the fitting rows


@torch.no_grad()
def critic_fit(view: AgentView, batch: Batch, gamma: float,
               reference_below: float | None = None) -> dict[str, float]:
    """`explained`: 1 - Var(y - Q) / Var(y) of the one-step targets y (see above);
    `target_std`, `target_size` and `td_rms` (their std, their mean size |y| and the TD
    error's RMS, in reward units). Where `explained` is under `reference_below`, also
    `held_explained` and `reference_explained` (`reference_fit`: the critic's and a
    plain regression's share on the rows the regression never saw)."""
    q = view.q_value(batch.obs, batch.actions).double()  # [B, 1]
    next_q = view.q_value(batch.next_obs, view.actor(batch.next_obs)).double()
    target = batch.rewards.double() + gamma * (1.0 - batch.terminated.double()) * next_q
    error = target - q
    explained = _explained(target, q)
    stats = {"explained": explained, "target_std": float(target.var()) ** 0.5,
             "target_size": float(target.abs().mean()),
             "td_rms": float(error.square().mean().sqrt())}
    if reference_below is not None and explained < reference_below:
        inputs = torch.cat([batch.obs.flatten(1), batch.actions.flatten(1)], dim=1)
        held, reference = reference_fit(inputs, target[:, 0], q[:, 0])
        stats.update(held_explained=held, reference_explained=reference)
    return stats


def _explained(target: torch.Tensor, fit: torch.Tensor) -> float:
    spread = float(target.var())
    return 1.0 - float((target - fit).var()) / spread if spread > 0 else float("nan")


@torch.no_grad()
def reference_fit(inputs: torch.Tensor, target: torch.Tensor,
                  q: torch.Tensor) -> tuple[float, float]:
    """The critic's explained share (`q`) and a plain regression's on the rows it never
    saw: the rows cut into `BLOCKS` time blocks (neighbouring transitions are nearly
    alike, so a random split would score a copy), blocks 0 and 1 of every 4 fit it,
    block 2 chooses its kernel width and ridge penalty, block 3 scores both. Random
    Fourier features of the inputs standardised on the fitting rows, from a generator
    of its own (the same draws at every measurement; none from the run's streams), on
    the CPU (a few thousand rows)."""
    inputs, target, q = inputs.float().cpu(), target.double().cpu(), q.double().cpu()
    rows = inputs.shape[0]
    block = torch.arange(rows) * BLOCKS // max(rows, 1) % 4
    fit, choose, score = block <= 1, block == 2, block == 3
    finite = bool(torch.isfinite(inputs).all() and torch.isfinite(target).all())
    if not finite or int(score.sum()) < 16 or not float(target[score].var()) > 0:
        return float("nan"), float("nan")
    mean, std = inputs[fit].mean(0), inputs[fit].std(0).clamp_min(1e-6)
    x = (inputs - mean) / std
    generator = torch.Generator().manual_seed(0)
    directions = torch.randn(x.shape[1], FEATURES, generator=generator)
    phases = 2 * np.pi * torch.rand(FEATURES, generator=generator)
    y = target - target[fit].mean()
    best = (-float("inf"), None)
    eye = torch.eye(FEATURES, dtype=torch.float64)
    for width in WIDTHS:
        # Features and their products in float32 (values in [-1, 1], sums of a thousand
        # rows), the solve in float64.
        features = torch.cos(x @ directions / (width * x.shape[1] ** 0.5) + phases)
        if not bool(torch.isfinite(features).all()):  # inputs far outside the fit's rows
            continue
        gram = (features[fit].T @ features[fit]).double()
        features = features.double()
        moment = features[fit].T @ y[fit]
        for ridge in RIDGES:
            weights = torch.linalg.solve(gram + ridge * int(fit.sum()) * eye, moment)
            chosen = _explained(y[choose], features[choose] @ weights)
            if chosen > best[0]:
                best = (chosen, features[score] @ weights)
    held = _explained(target[score], q[score])
    if best[1] is None:  # no width gave a finite choice (targets alike on those rows)
        return held, float("nan")
    return held, _explained(y[score], best[1])


@torch.no_grad()
def actor_rank(view: AgentView, obs: torch.Tensor, generator: torch.Generator,
               target_std: float) -> dict[str, float]:
    """`rank`: the mean over states of the share of uniform candidate actions that the
    critic values below the actor's action (ties: half); `z`: the mean over states of
    the actor's Q minus the candidates' mean, over their std; `gap`: the mean over
    states of how much more the best candidate is worth than the actor's action, and
    `action_spread`: the mean over states of the candidates' Q std, both over the
    critic's targets' std (`target_std`)."""
    n, dims = obs.shape[0], len(view.action_low)
    low = torch.as_tensor(view.action_low, dtype=obs.dtype, device=obs.device)
    high = torch.as_tensor(view.action_high, dtype=obs.dtype, device=obs.device)
    draws = torch.rand(n, CANDIDATES, dims, generator=generator, dtype=torch.float64)
    candidates = (low + (high - low) * draws.to(obs.device, obs.dtype))  # [N, C, A]
    states = obs[:, None, :].expand(n, CANDIDATES, obs.shape[1]).reshape(n * CANDIDATES, -1)
    flat = candidates.reshape(n * CANDIDATES, dims)
    # In parts of CHUNK rows: the critic's activations for all N * C rows at once would
    # be the diagnostics' largest allocation (each row's Q does not depend on the others).
    q_candidates = torch.cat([view.q_value(states[i:i + CHUNK], flat[i:i + CHUNK]).double()
                              for i in range(0, n * CANDIDATES, CHUNK)]).reshape(n, CANDIDATES)
    q_actor = view.q_value(obs, view.actor(obs)).double()  # [N, 1]
    below = (q_candidates < q_actor).double() + 0.5 * (q_candidates == q_actor).double()
    spread = q_candidates.std(dim=1)  # [N]
    best = q_candidates.max(dim=1).values  # [N]
    z = (q_actor[:, 0] - q_candidates.mean(dim=1)) / spread.clamp_min(1e-12)
    scale = target_std if target_std > 0 else float("nan")
    return {"rank": float(below.mean()), "z": float(z.mean()),
            "gap": float((best - q_actor[:, 0]).clamp_min(0).mean()) / scale,
            "action_spread": float(spread.mean()) / scale}


class FitChecks:
    """Both statistics on the buffer's newest rows every `critic_fit.every_updates`
    updates, logged (flow1.jsonl's "fit" lines) and handed to the rules of
    utils/diagnosis/rules/fit_rules.py; `report` takes their findings. The candidates
    come from a generator of the checks' own, seeded from the run's diagnostics seed."""

    def __init__(self, context: RuleContext, buffer: ReplayBuffer, logger: RunLogger,
                 report: Callable[[list[Finding]], None], seed: int) -> None:
        self.view, self.buffer, self.logger, self.report = context.view, buffer, logger, report
        self.gamma = context.config.gamma
        options = context.config.diagnostics.critic_fit
        self.every, self.min_updates = options.every_updates, options.min_updates
        # The regression runs only where critic_fit could judge by it: a critic leaving
        # under half of `min_unexplained` of its targets unexplained is not judged by it.
        self.reference_below = 1.0 - options.min_unexplained / 2
        self.rules = [cls(context) for cls in fit_rules.CHECKS]
        self.generator = torch.Generator().manual_seed(seed)

    def after_update(self, env_steps: int, updates: int) -> None:
        if updates % self.every or len(self.buffer) < STATES or self.view is None:
            return
        if all(rule.rule.action == "off" for rule in self.rules):
            return
        stats = self.measure(self.buffer.newest(ROWS), updates)
        self.logger.diagnostic("fit", env_steps, updates=updates, **stats)
        for rule in self.rules:
            self.report(rule.check(env_steps, updates, stats))

    def measure(self, batch: Batch, updates: int) -> dict[str, Any]:
        judged = updates >= self.min_updates
        fit = critic_fit(self.view, batch, self.gamma,
                         self.reference_below if judged else None)
        rank = actor_rank(self.view, batch.obs[-STATES:], self.generator, fit["target_std"])
        return {**{k: _rounded(v) for k, v in fit.items()},
                **{k: _rounded(v) for k, v in rank.items()}, "rows": len(batch.obs)}

    def unjudged(self) -> dict[str, str]:
        return {rule.spec.name: why for rule in self.rules
                if (why := rule.unjudged()) is not None}

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(),
                "rules": {rule.spec.name: rule.state_dict() for rule in self.rules}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        for rule in self.rules:
            rule.load_state_dict(state["rules"][rule.spec.name])


def _rounded(value: float) -> float:
    return float(f"{value:.4g}") if np.isfinite(value) else value
