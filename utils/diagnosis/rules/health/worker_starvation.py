"""`worker_starvation`: with env runners (`num_workers`), one side waits for the other.

An actor-learner run is as fast as its slower side. When the runners cannot step as
fast as the learner takes transitions, the learner waits for chunks; when the learner
cannot update as fast as the runners step, the runners wait idle for it to ask again
(the bounded queue of async mode, the rounds of lockstep). Both shares of time are
measured by scripts/workers/worker_stats.py (status.json's `workers`, TensorBoard's
`workers/`), which hands each new reading to this rule: it judges only runs with env
runners, and only once learning has started (during the random warm-up the learner
has no updates to do, so it always waits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rltrain.utils.config.fields import AT_LEAST_ONE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

SPECS = (RuleSpec(
    name="worker_starvation",
    section="monitor",
    group="Health rules",
    threshold=80.0,
    action="warn",
    fires_when="with num_workers: the learner waits for transitions, or the env runners wait "
               "idle for the learner, more than this percent of the time, for `readings` "
               "readings in a row once learning has started",
    hypothesis="if the runners step slower than the learner takes transitions (too few "
               "runners or envs, or chunks so short that Ray's cost per chunk dominates), "
               "then the learner waits for chunks most of the time; if the learner updates "
               "slower than the runners step (too many runners, or too many updates per env "
               "step), then the runners wait idle for it",
    check="status.json's workers (rltrain status): learner_waiting_percent and each runner's "
          "idle_percent; TensorBoard's workers/ over time",
    options=(Option("readings", 3, "readings in a row beyond the threshold before the rule "
                    "fires (one a second at most, every log_freq env steps)", AT_LEAST_ONE),),
),)

class WorkerStarvation(RuleHook):
    """Told each new reading of the pace (`check`); fires when one side has waited for
    the other beyond the threshold for `readings` readings in a row."""

    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.learner_starved = 0  # readings in a row: the learner waited for chunks
        self.runners_starved = 0  # readings in a row: the runners waited for the learner
        self.readings = 0  # readings judged (after learning started)

    def configured(self) -> tuple[Any, str]:
        action = self.settings.action if self.context.config.num_workers > 0 else "off"
        return self.settings.threshold, action

    def check(self, env_steps: int, learner_waiting_percent: float,
              runners_idle_percent: Sequence[float]) -> list[Finding]:
        """One reading: the share of time the learner waited for chunks, and each runner's
        share of time it waited idle for the learner."""
        config = self.context.config
        if (self.rule.action == "off" or env_steps <= config.learning_starts
                or not runners_idle_percent):
            return []
        self.readings += 1
        idle = sum(runners_idle_percent) / len(runners_idle_percent)
        learner_starved = learner_waiting_percent > self.rule.threshold
        runners_starved = not learner_starved and idle > self.rule.threshold
        self.learner_starved = self.learner_starved + 1 if learner_starved else 0
        self.runners_starved = self.runners_starved + 1 if runners_starved else 0
        if self.learner_starved >= self.settings.readings:
            self.learner_starved = 0  # the next finding needs as many readings again
            return self._learner_starved(env_steps, learner_waiting_percent)
        if self.runners_starved >= self.settings.readings:
            self.runners_starved = 0
            return self._runners_starved(env_steps, idle)
        return []

    def _learner_starved(self, env_steps: int, waiting: float) -> list[Finding]:
        config = self.context.config
        more = config.num_workers * 2
        mode = (", worker_mode=async (runners step while the learner updates)"
                if config.worker_mode == "lockstep" else "")
        return self.fire(
            env_steps, round(waiting, 1),
            f"the learner waited for transitions {waiting:.0f}% of the time for "
            f"{self.settings.readings} readings in a row: the env runners starve it; "
            f"resume with more runners, --set num_workers={more} (today "
            f"{config.num_workers}), or more envs each (num_envs {config.num_envs}){mode}, "
            f"or longer chunks (worker_chunk_steps {config.worker_chunk_steps}) if Ray's "
            "cost per chunk is the bottleneck",
            suggested_set={"num_workers": more})

    def _runners_starved(self, env_steps: int, idle: float) -> list[Finding]:
        config = self.context.config
        if config.num_workers > 1:
            change = {"num_workers": config.num_workers // 2}
            words = (f"fewer runners, --set num_workers={change['num_workers']} (today "
                     f"{config.num_workers}), or fewer updates per env step (utd_ratio "
                     f"{config.utd_ratio})")
        elif config.utd_ratio > 1:
            change = {"utd_ratio": config.utd_ratio // 2}
            words = (f"fewer updates per env step, --set utd_ratio={change['utd_ratio']} "
                     f"(today {config.utd_ratio})")
        else:
            change = {"num_workers": 0}
            words = ("no runner at all, --set num_workers=0: the learner alone is slower "
                     "than one runner")
        return self.fire(
            env_steps, round(idle, 1),
            f"the env runners waited idle for the learner {idle:.0f}% of the time (mean of "
            f"{config.num_workers}) for {self.settings.readings} readings in a row: the "
            f"learner starves them; resume with {words}",
            suggested_set=change)

    def unjudged(self) -> str | None:
        return self.waiting(self.readings, self.settings.readings, "readings of the pace",
                            "one a second at most, every log_freq "
                            f"{self.context.config.log_freq} env steps after learning_starts")
