"""Do the networks do their jobs? `critic_fit`, `actor_fit` and `actor_direction`.

utils/diagnosis/measure/fit.py measures, every `every_updates` updates of the critic
(`critic_fit`'s option), how much of its one-step targets' variance the critic explains
and where the actor's action ranks among uniform actions by the critic's values; the
flow-1 hook hands each measurement to the checks here. Each judges its statistic once
the critic has had `min_updates` updates, and fires after `measurements` measurements
in a row beyond its threshold:

- `critic_fit`: the critic explains less than `threshold` of its targets' variance, or
  it leaves over `reference_ratio` times as much of it unexplained as a plain
  regression fitted on neighbouring transitions leaves on the same rows (and over
  `min_unexplained`). A critic too small for the value function, one whose rate or
  clipped gradient barely moves it, and targets it cannot predict (a noisy reward, a
  state the observation does not hold) all fall under the threshold; the second test
  tells the first two from the third, since unpredictable targets defeat the
  regression too.
- `actor_fit`: the actor's rank under `threshold` (and above `actor_direction`'s): it
  does not reach the actions its critic values most. A too small actor, one whose rate,
  clipped gradient or rare updates barely move it.
- `actor_direction`: the actor's rank under `threshold`, or its action's value over
  `below_mean` of the uniform actions' std under their mean: it sits among the actions
  its critic values least, as an actor that descends its critic does (a loss of the
  wrong sign, an optimiser stepping the wrong way).

The actor is judged only where the critic tells actions apart (the candidates' Q
spread at least `min_spread` of its targets' spread): a critic that values every action
alike gives the rank no meaning. The fix each proposes comes from the run's own
settings (rules/_settings.py): what of that network lies far from the usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, NON_NEGATIVE, UNIT_INTERVAL
from rltrain.utils.diagnosis.rules._settings import far_off, wider
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

SPECS = (
    RuleSpec(
        name="critic_fit", section="diagnostics", group="Training set-up", threshold=0.5,
        algorithms=ACTOR_Q_CRITICS,
        action="warn",
        fires_when="the critic explains less than this share of its one-step targets' "
                   "variance (1 - Var(TD error) / Var(targets), on the newest transitions), "
                   "or leaves over `reference_ratio` times the share a plain regression "
                   "leaves unexplained on rows it never saw (and over `min_unexplained`), "
                   "`measurements` measurements in a row once it has had `min_updates` updates",
        hypothesis="if the critic cannot fit its targets (too few units, a learning rate or "
                   "a clipped gradient that barely moves it, or targets it cannot predict: a "
                   "noisy reward, a state the observation does not hold), then its TD error "
                   "stays near the targets' own spread instead of falling under it",
        check="the finding names the critic's settings that lie far from the usual (layer "
              "widths, critic_lr, grad_clip_norm); if none does, look at what the targets "
              "hold: the reward's noise, and the partial_observability finding",
        options=(Option("every_updates", 500, "updates between two measurements (for "
                        "critic_fit, actor_fit and actor_direction)", AT_LEAST_ONE),
                 Option("min_updates", 2000, "updates before the networks are judged",
                        NON_NEGATIVE),
                 Option("measurements", 3, "measurements in a row before a rule fires",
                        AT_LEAST_ONE),
                 Option("min_target_spread", 0.01, "critic_fit judges only where its "
                        "targets' std is at least this share of their mean size (values "
                        "alike everywhere: a solved task, whose TD error is noise)",
                        NON_NEGATIVE),
                 Option("reference_ratio", 5.0, "critic_fit fires where the critic leaves "
                        "over this many times a plain regression's unexplained share of "
                        "its targets", AT_LEAST_ONE),
                 Option("min_unexplained", 0.03, "... and over this share of its targets' "
                        "variance (a critic this close to them fits well enough)",
                        UNIT_INTERVAL))),
    RuleSpec(
        name="actor_fit", section="diagnostics", group="Training set-up", threshold=0.75,
        algorithms=ACTOR_Q_CRITICS,
        action="warn",
        fires_when="the actor's action ranks under this share of uniform actions by the "
                   "critic's values (and at or above actor_direction's), `measurements` "
                   "measurements in a row (critic_fit's options)",
        hypothesis="if the actor cannot follow its critic (too few units, a learning rate, a "
                   "clipped gradient or updates too rare to move it), then its actions stay "
                   "below the ones the critic values most",
        check="the finding names the actor's settings that lie far from the usual (layer "
              "widths, actor_lr, grad_clip_norm, the algorithm's policy_delay)",
        options=(Option("min_spread", 0.05, "judged only where the critic's values of "
                        "uniform actions spread at least this share of its targets' spread",
                        NON_NEGATIVE),)),
    RuleSpec(
        name="actor_direction", section="diagnostics", group="Training set-up",
        algorithms=ACTOR_Q_CRITICS,
        threshold=0.25, action="warn",
        fires_when="the actor's action ranks under this share of uniform actions by the "
                   "critic's values, or the critic values it `below_mean` of their std "
                   "under their mean, `measurements` measurements in a row (critic_fit's "
                   "options; actor_fit's min_spread)",
        hypothesis="if the actor descends its critic (its loss has the wrong sign, or its "
                   "optimiser steps against the gradient), then its actions sit among those "
                   "the critic values least, below what a uniform action is worth",
        check="the actor's loss must be -Q(s, pi(s)) (minimised), or +Q maximised; check "
              "the sign and which optimiser steps it",
        options=(Option("below_mean", 0.5, "fires also where the actor's action is worth "
                        "this many of the uniform actions' Q std under their mean (averaged "
                        "over states): a random actor would sit at about 0, one that follows "
                        "its critic above it", NON_NEGATIVE),)),
)


class _NetworkCheck(RuleCheck):
    """A rule judged on fit.py's measurements, `measurements` in a row beyond it."""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.options = context.config.diagnostics.critic_fit
        self.beyond = 0  # measurements in a row beyond the threshold
        self.judged = 0  # measurements judged so far

    def check(self, env_steps: int, updates: int, stats: dict[str, Any]) -> list[Finding]:
        if updates < self.options.min_updates or not self.judgeable(stats):
            return []
        self.judged += 1
        self.beyond = self.beyond + 1 if self.failing(stats) else 0
        if self.beyond < self.options.measurements:
            return []
        self.beyond = 0  # the next finding needs as many measurements again
        return self.finding(env_steps, updates, stats)

    def judgeable(self, stats: dict[str, Any]) -> bool:
        return stats.get("explained") == stats.get("explained")  # not NaN

    def failing(self, stats: dict[str, Any]) -> bool:
        raise NotImplementedError

    def finding(self, env_steps: int, updates: int, stats: dict[str, Any]) -> list[Finding]:
        raise NotImplementedError

    def unjudged(self) -> str | None:
        return self.waiting(self.judged, self.options.measurements, "measurements",
                            f"one every {self.options.every_updates} updates from update "
                            f"{self.options.min_updates} on")

    def state_dict(self) -> dict[str, Any]:
        return {"beyond": self.beyond, "judged": self.judged}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.beyond, self.judged = int(state["beyond"]), int(state["judged"])


class CriticFit(_NetworkCheck):
    spec = SPECS[0]

    def judgeable(self, stats: dict[str, Any]) -> bool:
        """Targets that spread under `min_target_spread` of their size hold values alike
        in every state (InvertedPendulum balanced for good: about 100 everywhere, std
        0.25): what the critic explains of that spread says nothing of its fit."""
        size = stats.get("target_size")  # not measured before it was kept
        if size is not None and stats["target_std"] < self.options.min_target_spread * size:
            return False
        return super().judgeable(stats)

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.outfit = 0  # measurements in a row that a plain regression outfits it

    def check(self, env_steps: int, updates: int, stats: dict[str, Any]) -> list[Finding]:
        """Two streaks, each `measurements` long before it fires: under the threshold
        (`beyond`) and outfitted by the regression (`outfit`); a finding restarts both."""
        if updates < self.options.min_updates or not self.judgeable(stats):
            return []
        self.judged += 1
        self.beyond = self.beyond + 1 if self.failing(stats) else 0
        self.outfit = self.outfit + 1 if self.outfitted(stats) else 0
        needed = self.options.measurements
        if self.beyond < needed and self.outfit < needed:
            return []
        outfitted = self.beyond < needed
        self.beyond = self.outfit = 0
        return self._finding(env_steps, updates, stats, outfitted)

    def failing(self, stats: dict[str, Any]) -> bool:
        return stats["explained"] < self.rule.threshold

    def outfitted(self, stats: dict[str, Any]) -> bool:
        """The critic leaves over `reference_ratio` times what a plain regression leaves
        unexplained of the same targets, and over `min_unexplained`: they can be fitted
        and it does not fit them."""
        return (outfit_ratio(stats, self.options.min_unexplained)
                > self.options.reference_ratio)

    def _finding(self, env_steps: int, updates: int, stats: dict[str, Any],
                 outfitted: bool) -> list[Finding]:
        config = self.context.config
        proposed, why = far_off(config, "critic")
        if proposed:
            cause = "; ".join(why) + ": train a new run with " + _sets(proposed)
        elif outfitted and config.critic_lr < config.actor_lr:
            # a critic slower than its actor may be chasing it, not too small
            cause = (f"it learns slower than its actor (critic_lr {config.critic_lr:g}, "
                     f"actor_lr {config.actor_lr:g}): the actor may move its targets faster "
                     "than it follows (see actor_pace and learning_rate)")
        elif outfitted:
            proposed, why = wider(config, "critic")
            cause = ("; ".join(why) + ": train a new run with " + _sets(proposed) if proposed
                     else "its layers are already as wide as rltrain proposes: look at its "
                          "learning rate and at what its targets are computed from")
        else:
            cause = ("its settings are usual: the targets hold what it cannot predict (a "
                     "noisy reward, a state the observation does not hold)")
        if outfitted:
            evidence = (f"the critic leaves {1 - stats['held_explained']:.3f} of its one-step "
                        "targets' variance unexplained where a plain regression fitted on "
                        f"neighbouring transitions leaves {1 - stats['reference_explained']:.3f}"
                        " on the same rows: the targets can be fitted and it does not fit them")
        else:
            evidence = (f"the critic explains {stats['explained']:.2f} of its one-step "
                        f"targets' variance (TD error RMS {stats['td_rms']:.3g} against the "
                        f"targets' std {stats['target_std']:.3g}): it cannot fit them")
        # the evidence: the explained share, or both unexplained shares compared
        value = ({"unexplained": _four(1 - stats["held_explained"]),
                  "regression_unexplained": _four(1 - stats["reference_explained"])}
                 if outfitted else stats["explained"])
        return self.fire(
            env_steps, value,
            f"after {updates} updates {evidence}, {self.options.measurements} measurements "
            f"in a row; {cause}", suggested_set=proposed)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "outfit": self.outfit}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.outfit = int(state.get("outfit", 0))  # not kept before the regression


class ActorFit(_NetworkCheck):
    spec = SPECS[1]

    def judgeable(self, stats: dict[str, Any]) -> bool:
        return stats.get("action_spread", 0.0) >= self.settings.min_spread

    def failing(self, stats: dict[str, Any]) -> bool:
        direction = self.context.config.diagnostics.actor_direction.threshold
        return direction <= stats["rank"] < self.rule.threshold

    def finding(self, env_steps: int, updates: int, stats: dict[str, Any]) -> list[Finding]:
        proposed, why = far_off(self.context.config, "actor")
        cause = ("; ".join(why) + ": " + _sets(proposed) if proposed else
                 "its settings are usual: look at what reaches its gradient "
                 "(broken_gradient, action_saturation)")
        return self.fire(
            env_steps, stats["rank"],
            f"after {updates} updates the critic values the actor's action above only "
            f"{stats['rank']:.0%} of uniform actions, {self.options.measurements} "
            f"measurements in a row: the actor does not reach what its critic values most; "
            f"{cause}", suggested_set=proposed,
            # A warning only where a setting of the actor explains it: late in healthy
            # runs the rank falls too (Pendulum DDPG 0.66 at 17,000 updates).
            observation=not proposed)


class ActorDirection(_NetworkCheck):
    spec = SPECS[2]

    def judgeable(self, stats: dict[str, Any]) -> bool:
        min_spread = self.context.config.diagnostics.actor_fit.min_spread
        return stats.get("action_spread", 0.0) >= min_spread

    def failing(self, stats: dict[str, Any]) -> bool:
        z = stats.get("z", 0.0)  # not in fit lines written before it was judged
        return stats["rank"] < self.rule.threshold or z < -self.settings.below_mean

    def finding(self, env_steps: int, updates: int, stats: dict[str, Any]) -> list[Finding]:
        return self.fire(
            env_steps, stats["rank"],
            f"after {updates} updates the critic values the actor's action above only "
            f"{stats['rank']:.0%} of uniform actions, {-stats['z']:.2f} of their std under "
            f"their mean, {self.options.measurements} measurements in a row: the actor "
            "moves toward what its critic values least; check the sign of the actor's "
            "loss (-Q, minimised)", suggested_set={})


def outfit_ratio(stats: dict[str, Any], floor: float) -> float:
    """What the critic leaves unexplained of its one-step targets over what a plain
    regression leaves, on the rows the regression never saw (a `fit` measurement's
    `held_explained` and `reference_explained`); 0 where the critic leaves `floor` or
    less, or the two were not compared."""
    held, reference = stats.get("held_explained"), stats.get("reference_explained")
    if held is None or reference is None or held != held or reference != reference \
            or 1.0 - held <= floor:
        return 0.0
    return (1.0 - held) / max(1.0 - reference, 1e-12)


def _four(value: float) -> float:
    return float(f"{value:.4g}")


def _sets(proposed: dict[str, Any]) -> str:
    return " ".join(f"--set {k}={_yaml(v)}" for k, v in proposed.items())


def _yaml(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


CHECKS = (CriticFit, ActorFit, ActorDirection)
