"""`non_finite`: NaN/inf in an observation, reward or action, a loss, Q, a gradient norm,
the parameters or an evaluation return.

The loop stores only finite transitions (`is_finite`); this rule says where a NaN/inf
came from. An update's non-finite metrics are judged on the weights: that optimiser
step was skipped, and the explosion rules leave such an update to this one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Evaluation, Step, Steps, Update

SPECS = (RuleSpec(
    name='non_finite',
    section='monitor',
    group='Health rules',
    fires_when='NaN/inf in an observation, reward, action, loss or Q value',
    action='pause',
    hypothesis='if NaN/inf enters observations, rewards or losses, then updates produce NaN '
               'weights',
    check='the finding says where: in an observation or reward, assert finite values in the '
          "env's step and check its divisions; in an update's loss, Q or gradients, the "
          'critic diverged: lower the learning rates, clip gradients (grad_clip_norm), check '
          'the reward scale',
    fixed_threshold='nothing: any NaN/inf fires it',
    hint='fix the env (its NaN/inf transitions are not stored), or --set '
         'monitor.non_finite.action=warn to train on without them',
    weight_hint='--set critic_lr=1e-4 --set actor_lr=1e-4 --set grad_clip_norm=10'),)


def is_finite(obs: np.ndarray, action: np.ndarray, reward: float) -> bool:
    """Whether a transition may be stored (NaN/inf values are never learnt from)."""
    return bool(np.isfinite(obs).all() and math.isfinite(reward) and np.isfinite(action).all())


def all_finite(*arrays: np.ndarray) -> bool:
    """Whether every value of these arrays is finite, the way a loop that asks at every
    step can afford: one sum per float array (a NaN or inf makes the sum NaN or inf); a
    sum that overflows to inf is checked value by value. Integer and bool arrays are
    finite."""
    total = 0.0
    for array in arrays:
        if array.dtype.kind in "fc":
            total += float(np.add.reduce(array, axis=None).real)
    if math.isfinite(total):
        return True
    return all(bool(np.isfinite(array).all()) for array in arrays)


def finite_rows(obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """`is_finite` of each transition of a vector step (row i of each: env i's), in one
    call."""
    n = len(rewards)
    return (np.isfinite(np.asarray(obs).reshape(n, -1)).all(axis=1)
            & np.isfinite(np.asarray(actions).reshape(n, -1)).all(axis=1)
            & np.isfinite(np.asarray(rewards, np.float64)))


def non_finite_metrics(metrics: dict[str, float]) -> list[str]:
    """The update metrics that are NaN/inf."""
    return [k for k, v in metrics.items() if not math.isfinite(v)]


class NonFinite(RuleHook):
    spec = SPECS[0]
    update_batches = True  # judges the metrics, which a batch's updates share

    def on_step(self, step: Step) -> list[Finding]:
        if step.stored:  # the loop found it finite (`is_finite`)
            return []
        return self.check_transition(step.env_steps, step.next_obs, step.action, step.reward)

    def on_steps(self, steps: Steps) -> list[Finding]:
        if all(steps.stored.tolist()):  # (NumPy's all() costs more on a few rows)
            return []
        return [f for step in steps.each() for f in self.on_step(step)]

    def on_update(self, update: Update) -> list[Finding]:
        return self.check_update(update.env_steps, update.metrics)

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        steps, mean = evaluation.env_steps, evaluation.result.mean
        if np.isfinite(mean):
            return []
        return self.fire(steps, "evaluation return",
                         f"the evaluation return at env step {steps} is {mean}: the env gave "
                         "NaN/inf rewards in evaluation (training leaves such rewards out)")

    def check_transition(self, env_steps: int, obs: np.ndarray, action: np.ndarray,
                         reward: float) -> list[Finding]:
        bad = [name for name, ok in (("observation", np.isfinite(obs).all()),
                                     ("reward", math.isfinite(reward)),
                                     ("action", np.isfinite(action).all())) if not ok]
        if not bad:
            return []
        return self.fire(env_steps, ", ".join(bad),
                         f"non-finite {' and '.join(bad)} at env step {env_steps}; the "
                         "transition was not stored")

    def check_update(self, env_steps: int, metrics: dict[str, float],
                     probe: bool = False) -> list[Finding]:
        """After an update (or, `probe`, the restored weights' loss, Q and gradients on a
        batch)."""
        bad = non_finite_metrics(metrics)
        if not bad:
            return []
        where = ("in the restored weights, probed on the newest replay batch" if probe
                 else f"in the update at env step {env_steps}; that optimiser step was "
                 "skipped")
        return self.fire(env_steps, ", ".join(bad), f"non-finite {', '.join(bad)} {where}",
                         on_weights=True)

    def check_parameters(self, env_steps: int, finite: bool) -> list[Finding]:
        """The restored networks' parameters (`finite`: none is NaN/inf)."""
        if finite:
            return []
        return self.fire(env_steps, "parameters", "the network parameters contain NaN/inf",
                         on_weights=True)
