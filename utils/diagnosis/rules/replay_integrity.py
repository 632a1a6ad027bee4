"""A watched loop's replay: do its batches hold what the env gave, and from when?

integrations/sampled_batches.py captures a plain loop's batch every few hundred updates
(the inputs of its critic and target critic) and compares it with the env steps the
Watcher saw (rltrain's own buffer and SB3's are not judged: they store what the env
gave). Both rules fire after `captures` captures in a row beyond their threshold:

- `transition_integrity`: more than `threshold` of a batch's rows hold an observation
  the env never gave while others match (rows never written, an index past the filled
  part), or have a next observation that did not follow their observation in the env
  (the observation stored as its own next one, columns or rows shifted);
- `sample_recency`: the batches' rows are on average younger than `threshold` of what
  uniform sampling from the rows the buffer holds would give: the batches come from the
  newest transitions only, and the critic forgets the rest.

The loop's done flags, where it hands the Watcher its batch, are `time_limit_terminal`'s
(input_rules.py).
"""

from __future__ import annotations

from typing import Any

from rltrain.agents.families import REPLAYED
from rltrain.utils.config.fields import AT_LEAST_ONE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Update

SPECS = (
    RuleSpec(
        name="transition_integrity", section="diagnostics",
        algorithms=REPLAYED,
        group="What goes into learning",
        threshold=0.1, action="warn",
        fires_when="more than this share of a watched loop's batch rows hold an observation "
                   "its env never gave (while other rows match) or a next observation that did "
                   "not follow it, `captures` captures in a row",
        hypothesis="if a loop stores or reads its transitions wrongly (the observation stored "
                   "as its own next one, rows read before they were written, an index off by "
                   "one), then its batches hold transitions the env never made, and the critic "
                   "learns the values of a different task",
        check="print a few rows of the batch beside the env steps they came from: the next "
              "observation of each row must be the observation the env returned after it; "
              "sample only the rows written so far",
        options=(Option("captures", 2, "captures in a row before the rule fires (one every "
                        "250 updates)", AT_LEAST_ONE),)),
    RuleSpec(
        name="sample_recency", section="diagnostics", group="What goes into learning",
        algorithms=REPLAYED,
        threshold=0.1,
        action="warn",
        fires_when="a watched loop's batch rows are on average younger than this share of what "
                   "uniform sampling from the rows its buffer holds would give, `captures` "
                   "captures in a row",
        hypothesis="if a loop draws its batches from its newest transitions only (a sampling "
                   "index that covers the last rows, a buffer far smaller than it should be), "
                   "then the batches are young, correlated transitions and the critic forgets "
                   "everything older",
        check="draw batch indices uniformly from every row written so far (and keep a buffer "
              "of 1e5-1e6 transitions)",
        options=(Option("captures", 2, "captures in a row before the rule fires (one every "
                        "250 updates)", AT_LEAST_ONE),)),
)


class _Captured(RuleHook):
    """A rule judged on each new capture of the loop's batches (AgentView.sampled_batches)."""

    update_batches = True  # a new capture is judged once, whatever the updates

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.seen = 0  # captures judged
        self.beyond = 0  # captures in a row beyond the threshold

    def on_update(self, update: Update) -> list[Finding]:
        view = self.context.view
        source = None if view is None else view.sampled_batches
        if source is None:
            return []
        stats, measured = source()
        if stats is None or measured == self.seen:
            return []
        self.seen = measured
        value = self.statistic(stats)
        if value is None:
            return []
        self.record(update.env_steps, value=round(value, 4))
        self.beyond = self.beyond + 1 if self.failing(value) else 0
        if self.beyond < self.settings.captures:
            return []
        self.beyond = 0
        return self.finding(update.env_steps, value, stats)

    def statistic(self, stats: dict[str, Any]) -> float | None:
        raise NotImplementedError

    def failing(self, value: float) -> bool:
        raise NotImplementedError

    def finding(self, env_steps: int, value: float, stats: dict[str, Any]) -> list[Finding]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"beyond": self.beyond}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.beyond = int(state["beyond"])


class TransitionIntegrity(_Captured):
    spec = SPECS[0]

    def statistic(self, stats: dict[str, Any]) -> float | None:
        if not stats.get("known"):
            return None  # no row matches: the critic sees transformed observations
        return max(stats.get("unknown", 0.0), stats.get("mismatch", 0.0))

    def failing(self, value: float) -> bool:
        return value > self.rule.threshold

    def finding(self, env_steps: int, value: float, stats: dict[str, Any]) -> list[Finding]:
        parts = []
        if stats.get("unknown", 0.0) > self.rule.threshold:
            parts.append(f"{stats['unknown']:.0%} of the batch's {stats['rows']} rows hold an "
                         "observation the env never gave (rows never written?)")
        if stats.get("mismatch", 0.0) > self.rule.threshold:
            parts.append(f"{stats['mismatch']:.0%} of the rows whose observation the env gave "
                         "have a next observation that did not follow it (the observation "
                         "stored as its own next one? rows shifted?)")
        return self.fire(env_steps, round(value, 3), "; ".join(parts) + ": the critic "
                         "learns from transitions the env never made", suggested_set={})


class SampleRecency(_Captured):
    spec = SPECS[1]

    def statistic(self, stats: dict[str, Any]) -> float | None:
        return stats.get("age_ratio")

    def failing(self, value: float) -> bool:
        return value < self.rule.threshold

    def finding(self, env_steps: int, value: float, stats: dict[str, Any]) -> list[Finding]:
        return self.fire(
            env_steps, round(value, 4),
            f"the batch's rows are on average {value:.1%} as old as uniform sampling from "
            "the rows the buffer holds would give: the batches come from the newest "
            "transitions only; sample every row written so far", suggested_set={})


CHECKS = (TransitionIntegrity, SampleRecency)
