"""`partial_observability`: the observation does not hold the state, or the reward is not
a function of what the agent sees.

utils/diagnosis/measure/observability.py measures, on the replay buffer's newest
transitions, how much better the steps before predict the next observation change than
the observation and the action alone (`history_gain`), and how much of the reward's
variance even that leaves unexplained (`reward_unexplained`). The rule fires on either:

- `history_gain` at least `threshold`: the past fills in what the observation leaves out
  (a velocity the sensors do not give, a lagging sensor). A critic and an actor that see
  one observation cannot act on what it hides; the action still acts, but later than
  the observation shows (so this is not an ignored action);
- `reward_unexplained` at least `reward_threshold`: the reward is mostly unpredictable
  from the observation, the action and what followed (a noisy reward, a reward of a
  state the agent never sees): the critic fits noise.

Neither has a config fix: the observation (stack the last frames, add the velocity) or
the reward must change in the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, UNIT_INTERVAL
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

SPECS = (RuleSpec(
    name="partial_observability", section="diagnostics", group="What goes into learning",
    algorithms=ACTOR_Q_CRITICS,
    threshold=0.9, action="warn",
    fires_when="the steps before explain at least this share of what the observation and "
               "the action leave unexplained of the next observation's change (or the reward "
               "stays at least `reward_threshold` unexplained), on the newest transitions",
    hypothesis="if the observation leaves out part of the state (a velocity, a lagging or "
               "noisy sensor) or the reward depends on what the agent never sees, then the "
               "steps before predict the next observation better than the observation "
               "itself, or the reward stays unpredictable: the networks cannot act on what "
               "is hidden",
    check="add what is missing to the observation (the velocities; the last few "
          "observations stacked); check the sensors' lag and noise and the reward's terms",
    options=(Option("reward_threshold", 0.7, "the share of the reward's variance left "
                    "unexplained from which the reward counts as unpredictable",
                    UNIT_INTERVAL),
             Option("every_updates", 10_000, "updates between two measurements (the first "
                    "once the buffer holds its rows)", AT_LEAST_ONE)),
),)


class PartialObservability(RuleCheck):
    spec = SPECS[0]

    def check(self, env_steps: int, stats: dict[str, Any]) -> list[Finding]:
        gain, reward = stats["history_gain"], stats["reward_unexplained"]
        if gain >= self.rule.threshold:
            return self.fire(
                env_steps, gain,
                f"the {stats['rows']} newest transitions' observation changes are predicted "
                f"{gain:.0%} better (of what remains unexplained) when the steps before are "
                "known than from the observation and the action alone: the observation "
                "leaves out part of the state (a velocity, a lagging or noisy sensor); add "
                "it, or stack the last observations")
        if reward == reward and reward >= self.settings.reward_threshold:
            return self.fire(
                env_steps, reward,
                f"{reward:.0%} of the reward's variance stays unexplained by the "
                "observation, the action, what followed and the steps before, on the "
                f"{stats['rows']} newest transitions: the reward is mostly noise to the "
                "agent (a noisy reward, or one of a state it does not see)")
        return []


CHECKS = (PartialObservability,)
