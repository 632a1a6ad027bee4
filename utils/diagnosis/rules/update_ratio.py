"""`update_ratio`: how many optimiser steps the actor takes per critic step.

An actor-critic's actor learns from its critic, so how often each is stepped sets how
the two keep up with each other. DDPG and SAC step both once per update; TD3 steps the
actor once per `policy_delay` (2) critic steps, CrossQ once per 3 (Fujimoto et al. found
delays of 2-3 best, and larger delays slower). Two ways it goes wrong:

- the actor stepped more often than its critic (a loop that runs the actor's step in an
  inner loop, or per critic head): it climbs the critic's errors several steps at a time
  before the critic corrects them;
- the actor stepped far more rarely (a policy delay of tens): the critic learns what
  the policy could do and the policy barely moves, so the run learns at a fraction of
  its pace, and, in TD3, the target networks (updated with the actor) crawl as well.

Counted, not guessed: a watched loop's optimiser steps per network (the view's
`step_sources`, integrations/gradient_sources.py); in rltrain's own update, the updates
that stepped the actor (their metrics carry `actor_loss`). Judged every `every_updates`
critic steps on the steps since the last judgement; each way fires once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules._settings import (
    USUAL_DELAY,
    algorithm_option,
    option_key,
)
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Update

SPECS = (RuleSpec(
    name="update_ratio", section="diagnostics", group="Training set-up", threshold=1.5,
    algorithms=ACTOR_Q_CRITICS, action="warn",
    fires_when="the actor's optimiser steps per critic optimiser step are above this, or "
               "below `low`, over `every_updates` critic steps",
    hypothesis="if the actor is stepped more often than its critic, then it climbs the "
               "critic's errors before they are corrected; if far more rarely (a policy "
               "delay of tens), then it barely moves while the critic learns, and the run "
               "learns at a fraction of its pace",
    check="step the actor once per critic step, or once per 2-3 (TD3's policy_delay); in a "
          "loop, look for an actor step inside an inner loop",
    options=(Option("low", 0.1, "actor steps per critic step under this: the actor is "
                    "stepped far more rarely than TD3's delay of 2-3", POSITIVE),
             Option("every_updates", 500, "critic steps between two judgements",
                    AT_LEAST_ONE)),
),)


class UpdateRatio(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.own = {"actor": 0, "critic": 0}  # rltrain's own update: its steps counted here
        self.since = {"actor": 0, "critic": 0}  # the counts at the last judgement
        self.fired: list[str] = []  # the ways that have fired ("fast", "slow")
        self.judged = 0

    def on_update(self, update: Update) -> list[Finding]:
        self.own["critic"] += 1
        self.own["actor"] += "actor_loss" in update.metrics
        counts = self.counts()
        if counts["critic"] < self.since["critic"]:  # a watch resumed: its counts restart
            self.since = {"actor": 0, "critic": 0}
        critic = counts["critic"] - self.since["critic"]
        if critic < self.settings.every_updates:
            return []
        ratio = (counts["actor"] - self.since["actor"]) / critic
        self.since = dict(counts)
        self.judged += 1
        way = ("fast" if ratio > self.rule.threshold else
               "slow" if ratio < self.settings.low else None)
        if way is None or way in self.fired:
            return []
        self.fired.append(way)
        return self._finding(update.env_steps, ratio, critic, way)

    def counts(self) -> dict[str, int]:
        """Optimiser steps so far of the actor and the critic: a watched loop's as its
        optimisers stepped, else rltrain's own update's."""
        view = self.context.view
        if view is None or view.step_sources is None:
            return self.own
        steps = view.step_sources().steps
        return {"actor": steps.get("actor", 0), "critic": steps.get("critic", 0)}

    def _finding(self, env_steps: int, ratio: float, critic: int, way: str) -> list[Finding]:
        config = self.context.config
        delay = algorithm_option(config, "policy_delay")
        if way == "fast":
            return self.fire(
                env_steps, round(ratio, 3),
                f"the actor's optimiser stepped {ratio:.3g} times per critic step over the "
                f"last {critic} critic steps: the actor climbs the critic's errors several "
                "steps at a time before the critic corrects them; step the actor once per "
                "critic step or fewer (look for its step inside an inner loop)",
                suggested_set={})
        fix = ({option_key(config, "policy_delay"): USUAL_DELAY}
               if delay is not None and delay > USUAL_DELAY else {})
        how = (f": --set {option_key(config, 'policy_delay')}={USUAL_DELAY} (today "
               f"{delay})" if fix else ": step the actor at least once per 2-3 critic steps")
        once = 1 / ratio if ratio > 0 else None
        return self.fire(
            env_steps, round(ratio, 4),
            "the actor's optimiser stepped "
            + (f"once per {once:.3g} critic steps" if once else "not once")
            + f" over the last {critic} critic steps: the policy barely moves while the "
              f"critic learns, and the run learns at a fraction of its pace{how}",
            suggested_set=fix)

    def unjudged(self) -> str | None:
        if self.judged:
            return None
        return self.waiting(max(self.counts()["critic"] - self.since["critic"], 0),
                            self.settings.every_updates, "critic steps")

    def state_dict(self) -> dict[str, Any]:
        return {"own": dict(self.own), "since": dict(self.since), "fired": list(self.fired),
                "judged": self.judged}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.own = {k: int(v) for k, v in state["own"].items()}
        self.since = {k: int(v) for k, v in state["since"].items()}
        self.fired = [str(w) for w in state["fired"]]
        self.judged = int(state["judged"])
