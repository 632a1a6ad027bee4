"""`long_horizon`: a discount whose horizon 1/(1 - gamma) is far beyond the episodes.

With gamma near 1 the critic must bootstrap over thousands of steps: its targets carry
value from far past the end of the episodes the agent lives, they grow slowly and noisily,
and Q outgrows every return the agent has reached. Measured: the mean length of the
newest episodes, the largest |episode return| seen, and the mean Q of the updates every
`every_updates` updates. It fires when the horizon is more than `ratio` times the mean
episode length and |Q| is above the threshold times the largest |episode return|.
"""

from __future__ import annotations

from typing import Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE, POSITIVE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Update

USUAL_GAMMA = 0.99
EPISODES = 20  # newest episodes whose mean length is compared

SPECS = (RuleSpec(
    name="long_horizon", section="diagnostics", threshold=1.5, action="warn",
    algorithms=ACTOR_Q_CRITICS,
    fires_when="gamma's horizon 1/(1-gamma) is over `ratio` times the mean episode length "
               "and |mean Q| over this times the largest |episode return| seen",
    hypothesis="if gamma looks far beyond the episodes, then the critic bootstraps value the "
               "agent never meets: Q grows past every episode return and learns slowly",
    check="lower gamma so that 1/(1-gamma) is about the episode length or less (0.99 looks "
          "about 100 steps ahead)",
    options=(Option("ratio", 10.0, "horizon over mean episode length from which gamma "
                    "counts as too long", POSITIVE),
             Option("every_updates", 500, "updates between two looks at mean Q",
                    AT_LEAST_ONE)),
),)


class LongHorizon(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.lengths: list[int] = []
        self.max_return = 0.0

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        self.lengths = [*self.lengths, episode.length][-EPISODES:]
        self.max_return = max(self.max_return, abs(episode.episode_return))
        return []

    def on_update(self, update: Update) -> list[Finding]:
        gamma = self.context.config.gamma
        if (update.updates % max(1, self.settings.every_updates) or not self.lengths
                or gamma >= 1 or "q_mean" not in update.metrics):
            return []
        horizon, length = 1 / (1 - gamma), sum(self.lengths) / len(self.lengths)
        q = abs(update.metrics["q_mean"])
        if horizon <= self.settings.ratio * length or q <= self.rule.threshold * self.max_return:
            return []
        proposed = max(min(USUAL_GAMMA, 1 - 1 / length), 0.9) if length > 1 else USUAL_GAMMA
        proposed = float(f"{proposed:.3g}")
        return self.rule.fire(
            update.env_steps, float(f"{horizon / length:.3g}"),
            f"gamma {gamma:g} looks {horizon:.0f} steps ahead, {horizon / length:.0f}x the "
            f"mean episode length {length:.0f}, and |mean Q| {q:.4g} is "
            f"{q / max(self.max_return, 1e-12):.2g}x the largest |episode return| "
            f"{self.max_return:.4g}: resume with --set gamma={proposed:g}",
            suggested_set={"gamma": proposed})

    def state_dict(self) -> dict[str, Any]:
        return {"lengths": self.lengths, "max_return": self.max_return}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lengths = [int(x) for x in state["lengths"]]
        self.max_return = float(state["max_return"])
