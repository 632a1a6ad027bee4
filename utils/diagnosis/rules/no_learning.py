"""`no_learning`: the evaluations are no better than random, or flat, and the policy
does one same thing everywhere.

The random warm-up's episodes (those ending within `learning_starts` env steps) measure
what a random policy earns, for free. From `evaluations` evaluations on, the rule looks
at the newest `evaluations`: their best mean return no better than the random episodes'
mean (by less than `margin` of its magnitude), or their spread under `margin` of the
returns' magnitude (theirs, the random episodes' or the largest training episode's:
flat), while the policy's deterministic actions over visited states vary by
less than the threshold (std over the states, share of the action half-range): the
policy settled on one action without ever finding what pays. The usual cause is
exploration that never reached the reward (a sparse reward behind a costly action, as
MountainCarContinuous's hill): more noise, temporally correlated noise, a longer
random warm-up. An actor whose weights did not move at all since the last evaluation
gets no gradient: that is no exploration problem (learning_rate, actor_stalled and
broken_gradient name it), so the rule leaves it alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rltrain.agents.families import ACTION_NOISE
from rltrain.utils.config.fields import NON_NEGATIVE, Range
from rltrain.utils.diagnosis.rules._probe import ProbeStates
from rltrain.utils.diagnosis.rules._weights import flat, relative_change
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Evaluation, Step

NOISE_AFTER = 0.5  # the exploration noise proposed (at least), relative to the half-range

SPECS = (RuleSpec(
    name="no_learning", section="diagnostics", threshold=0.1, action="warn",
    fires_when="the policy's actions vary by less than this (std over visited states, share "
               "of the action half-range) while the newest `evaluations` evaluations are no "
               "better than the random warm-up's episodes, or flat",
    hypothesis="if exploration never reaches what the reward pays for, then the policy "
               "settles on one action everywhere and its evaluations stay at or below what "
               "random actions earned, or flat",
    check="explore more: raise exploration_noise, use noise_type: ou (temporally "
          "correlated), or a longer random warm-up (learning_starts) in a new run",
    # Its remedy is the exploration noise, which only the ACTION_NOISE family adds (a
    # MAX_ENTROPY policy samples itself: entropy_collapse judges its exploration).
    algorithms=(ACTION_NOISE,),
    # One evaluation has no spread, so it would always count as flat: two at least.
    options=(Option("evaluations", 5, "newest evaluations judged (none before this many)",
                    Range(2)),
             Option("margin", 0.05, "share of the returns' magnitude counted as no "
                    "difference", NON_NEGATIVE)),
),)


class NoLearning(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.probe = ProbeStates()
        self.random_returns: list[float] = []
        self.largest_return = 0.0  # the largest |return| of a training episode so far
        self.means: list[float] = []
        self.actor: Any = None  # the actor's weights at the last evaluation

    def on_step(self, step: Step) -> list[Finding]:
        self.probe.offer(step.env_steps, step.obs)
        return []

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        if episode.env_steps <= self.context.config.learning_starts:
            self.random_returns.append(float(episode.episode_return))
        self.largest_return = max(self.largest_return, abs(float(episode.episode_return)))
        return []

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        n = self.settings.evaluations
        self.means = [*self.means, evaluation.result.mean][-n:]
        view = self.context.view
        if view is None:
            return []
        actor, before = flat(view.actor), self.actor
        self.actor = actor
        dead = before is not None and relative_change(before, actor) == 0
        if len(self.means) < n or not self.probe.ready or dead:
            return []
        spread = self.probe.spread(view)
        if spread >= self.rule.threshold:
            return []
        why = self._why()
        if why is None:
            return []
        return self._finding(evaluation.env_steps, spread, why)

    def _why(self) -> str | None:
        means, margin = np.asarray(self.means), self.settings.margin
        # Flat against the returns' own magnitude, the random policy's or the largest
        # training episode's, whichever is larger: a policy that stands still earns about
        # 0 (MountainCarContinuous: evaluations of -0.001 to -0.002), what the run's own
        # episodes earned does not.
        scale = max(float(np.abs(means).mean()),
                    abs(float(np.mean(self.random_returns))) if self.random_returns else 0.0,
                    self.largest_return, 1e-9)
        if self.random_returns:
            random = float(np.mean(self.random_returns))
            if means.max() <= random + margin * max(abs(random), 1e-9):
                return (f"the best of the newest {len(means)} evaluations, {means.max():.4g}, "
                        f"is no better than random actions' {random:.4g} (mean of "
                        f"{len(self.random_returns)} warm-up episodes)")
        if means.max() - means.min() <= margin * scale:
            return (f"the newest {len(means)} evaluations are flat "
                    f"({means.min():.4g}..{means.max():.4g})")
        return None

    def _finding(self, env_steps: int, spread: float, why: str) -> list[Finding]:
        config = self.context.config
        noise = float(f"{max(NOISE_AFTER, config.exploration_noise * 3):.3g}")
        suggested: dict[str, Any] = {"exploration_noise": noise}
        if config.noise_type != "ou":
            suggested["noise_type"] = "ou"
        change = " ".join(f"--set {k}={v}" for k, v in suggested.items())
        return self.rule.fire(
            env_steps, float(f"{spread:.3g}"),
            f"{why}, and the policy's actions vary by only {spread:.2g} of the action "
            f"half-range over visited states: it does one thing everywhere, so exploration "
            f"never found what the reward pays for; resume with {change} (today "
            f"exploration_noise {config.exploration_noise:g}, noise_type "
            f"{config.noise_type}), or start anew with a longer learning_starts (today "
            f"{config.learning_starts})",
            suggested_set=suggested)

    def unjudged(self) -> str | None:
        return self.waiting(len(self.means), self.settings.evaluations, "evaluations",
                            f"one every eval_freq {self.context.config.eval_freq} env steps")

    def state_dict(self) -> dict[str, Any]:
        return {"random_returns": self.random_returns, "means": self.means,
                "largest_return": self.largest_return}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.random_returns = [float(x) for x in state["random_returns"]]
        self.means = [float(x) for x in state["means"]]
        self.largest_return = float(state.get("largest_return", 0.0))  # not kept before
