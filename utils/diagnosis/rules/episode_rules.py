"""`short_episodes`: every episode ends alike, early.

Episodes that hit one wall, the same few steps every time whatever the agent does,
leave the agent a different problem than the task: nothing beyond the wall counts, and
an evaluation over such episodes can look excellent (Pendulum's cost over 5 steps is
small). A time limit set far too low (`max_episode_steps`), an end-of-task test that
fires at once (a health range no state meets, a wrong `done`), and a loop that never
resets the env after a time limit (every later step is "truncated" again) all do this.

Judged on the newest `episodes` training episodes (utils/diagnosis/measure/inputs.py
keeps their lengths): none lasted longer than the most common length L, at least
`threshold` of them ended at exactly L (a wall, not a policy that fails at varied
steps), and L is early: under a tenth of the env's registered time limit where it has
one, and under a quarter of the discount's horizon 1/(1-gamma) (the steps a reward
still counts for). A wall is the env's, not the policy's: the random warm-up's last
episodes got no further either (a deterministic policy can fall at one same step every
time: Hopper-v5's at 9; random actions then got further). Without such warm-up
episodes, only a wall of truncations (a time limit) is judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rltrain.utils.config.fields import AT_LEAST_ONE
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

LIMIT_SHARE = 0.1  # L under this share of the registered time limit is early
HORIZON_SHARE = 0.25  # and under this share of 1/(1-gamma)
# env_kwargs whose names say they decide when an episode ends: a wall's likely cause.
ENDING_WORDS = ("max_episode_steps", "terminat", "healthy", "limit", "done")

SPECS = (RuleSpec(
    name="short_episodes", section="diagnostics", group="What goes into learning",
    threshold=0.8, action="warn",
    fires_when="of the newest `episodes` training episodes, none lasted longer than the most "
               "common length L and at least this share ended at exactly L, with L under a "
               "tenth of the env's registered time limit (where it has one) and under a "
               "quarter of 1/(1-gamma)",
    hypothesis="if every episode is cut at one early step (a time limit set far too low, an "
               "end-of-task test that fires at once, an env not reset after its time limit), "
               "then the episodes all end alike at that step whatever the agent does, and "
               "nothing beyond it is learned, though the returns of such short episodes can "
               "look good",
    check="print the lengths and the terminated/truncated flags of a few episodes with "
          "random actions; check max_episode_steps, the env's end-of-task test (its health "
          "ranges) and that the loop resets the env when an episode ends",
    options=(Option("episodes", 20, "newest training episodes judged", AT_LEAST_ONE),),
),)


class ShortEpisodes(RuleCheck):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.limit = registered_limit(context.config.env_name)

    def check(self, env_steps: int, lengths: Sequence[int], terminated: Sequence[bool],
              warmup: Sequence[int] = ()) -> list[Finding]:
        """`lengths` and `terminated` of the episodes so far (newest last); `warmup`: the
        lengths of the random warm-up's last episodes."""
        n = self.settings.episodes
        if len(lengths) < n:
            return []
        newest, ended = list(lengths)[-n:], list(terminated)[-n:]
        wall, count = Counter(newest).most_common(1)[0]
        if max(newest) > wall or count / n < self.rule.threshold or not self.early(wall):
            return []
        if max(warmup, default=0) > wall or (not warmup and any(ended)):
            return []  # random actions got further: the policy's doing, not a wall
        how = ("terminated" if all(ended) else "truncated" if not any(ended)
               else "terminated or truncated")
        proposed, why = self.proposal()
        return self.fire(
            env_steps, wall,
            f"{count} of the last {n} episodes ended ({how}) at exactly {wall} steps and "
            f"none lasted longer{self.compared(wall)}: every episode hits one wall, whatever "
            f"the agent does; {why}", suggested_set=proposed)

    def early(self, length: int) -> bool:
        gamma = self.context.config.gamma
        horizon = 1.0 / (1.0 - gamma) if gamma < 1 else float("inf")
        return length < HORIZON_SHARE * horizon and (
            self.limit is None or length < LIMIT_SHARE * self.limit)

    def compared(self, length: int) -> str:
        gamma = self.context.config.gamma
        text = f" (the discount looks {1.0 / (1.0 - gamma):.0f} steps ahead" if gamma < 1 else " ("
        if self.limit is not None:
            text += f"; the env's registered time limit is {self.limit} steps"
        return text + ")"

    def proposal(self) -> tuple[dict[str, Any], str]:
        """The run's env settings that decide when an episode ends: their registered
        values where known (max_episode_steps), else named."""
        kwargs = self.context.config.env_kwargs
        if "max_episode_steps" in kwargs and self.limit is not None:
            return ({"env_kwargs.max_episode_steps": self.limit},
                    f"train a new run with --set env_kwargs.max_episode_steps={self.limit} "
                    f"(today {kwargs['max_episode_steps']})")
        named = [k for k in kwargs if any(word in k for word in ENDING_WORDS)]
        if named:
            return ({}, "the run sets " + ", ".join(f"{k}={kwargs[k]!r}" for k in named)
                    + ": check that an ordinary state does not end the episode")
        return ({}, "check the env's end-of-task test and that the loop resets the env "
                    "after every episode's end")


def registered_limit(env_id: str) -> int | None:
    """The time limit Gymnasium registers for `env_id` (None: none, or not registered)."""
    try:
        import gymnasium

        spec = gymnasium.spec(env_id)
    except Exception:  # an env of the user's, not registered by id: no limit known
        return None
    return spec.max_episode_steps


CHECKS = (ShortEpisodes,)
