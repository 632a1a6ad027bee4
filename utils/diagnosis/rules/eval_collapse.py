"""`eval_collapse`: the evaluation return falls far below its best and stays there.

The collapse after solving a task that TD3 users report: a policy that reached a good
return loses most of what it had learnt, for several evaluations in a row. The fall is
measured against the gain since the first evaluation (the warm-up's near-random policy),
so that it means the same for returns of any sign and scale; a gain below `min_gain` of
the first evaluation's magnitude, or of the spread of the last 100 training episodes'
returns (5th to 95th percentile), is noise around a policy that never learnt (too low a
learning rate shows so; so does MountainCar before the goal is found, whose returns
near 0 make any wobble a large share of the first), not a policy to lose. The finding names the
newest checkpoint written before the fall, to resume from with smaller learning rates.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.utils.config.fields import AT_LEAST_ONE, NON_NEGATIVE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import EpisodeEnd, Evaluation

LR_FACTOR = 0.3  # the learning rates proposed after a collapse, relative to today's
RETURNS = 100  # the training episodes whose returns' spread a gain must stand out of

SPECS = (RuleSpec(
    name="eval_collapse", section="monitor", threshold=0.5, action="warn",
    fires_when="the evaluation return stays below its best by more than this share of "
               "its gain since the first evaluation, for `evaluations` evaluations in a row",
    hypothesis="if training destabilised a policy that had learnt (the critic overestimates "
               "and the actor follows, or the learning rates are too high for the "
               "finer steps a good policy needs), then the evaluation return falls from its "
               "best and does not come back",
    check="resume the checkpoint the finding names (from before the fall) with smaller "
          "learning rates, or keep best_model.pt; algo: td3 and a lower tau also steady "
          "late training",
    hint="resume the checkpoint from before the fall that the finding names, with "
         "the smaller learning rates it proposes",
    group="Health rules",
    options=(Option("evaluations", 2, "evaluations in a row below the collapse line before "
                    "the rule fires", AT_LEAST_ONE),
             Option("min_gain", 0.2, "the gain since the first evaluation must be at least "
                    "this share of its magnitude, of the training returns' spread and of "
                    "the way to the env's declared solving return: a policy that learnt "
                    "something",
                    NON_NEGATIVE)),
),)


class EvalCollapse(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.first: float | None = None  # the first evaluation's mean return
        self.best: float | None = None
        self.best_step = 0
        self.below = 0  # evaluations in a row below the collapse line
        self.checkpoints: list[tuple[int, str]] = []  # periodic and paused, oldest first
        self.returns: deque[float] = deque(maxlen=RETURNS)  # training episodes', newest last
        # Here, not at the top: the config schema imports the rules, and the quick
        # commands import no gymnasium (a rule hook exists only in a watched run).
        from rltrain.utils.training.envs import solved_return

        self.solved = solved_return(context.config.env_name)  # None: not declared

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        if np.isfinite(episode.episode_return):
            self.returns.append(float(episode.episode_return))
        return []

    def returns_spread(self) -> float:
        """The 5th-95th percentile spread of the recent training episodes' returns."""
        if not self.returns:
            return 0.0
        low, high = np.percentile(np.fromiter(self.returns, dtype=np.float64), [5, 95])
        return float(high - low)

    def on_checkpoint(self, kind: str, path: Path, env_steps: int) -> list[Finding]:
        if kind != "best":
            self.checkpoints = [*self.checkpoints[-49:], (env_steps, str(path))]
        return []

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        mean, steps = evaluation.result.mean, evaluation.env_steps
        if self.first is None:
            self.first = mean
        if self.best is None or mean > self.best:
            self.best, self.best_step, self.below = mean, steps, 0
            return []
        gain = self.best - self.first
        scale = max(abs(self.first), self.returns_spread(),
                    0.0 if self.solved is None else self.solved - self.first)
        if gain <= 0 or gain < self.settings.min_gain * scale:
            return []
        share = (self.best - mean) / gain
        self.below = self.below + 1 if share > self.rule.threshold else 0
        if self.below < self.settings.evaluations:
            return []
        self.below = 0  # the next finding needs as many evaluations again
        return self._finding(steps, mean, share)

    def _finding(self, steps: int, mean: float, share: float) -> list[Finding]:
        config = self.context.config
        suggested = {"actor_lr": float(f"{config.actor_lr * LR_FACTOR:.3g}"),
                     "critic_lr": float(f"{config.critic_lr * LR_FACTOR:.3g}")}
        before = [path for step, path in self.checkpoints if step <= self.best_step]
        where = (f"resume the newest checkpoint from before the fall, {before[-1]}, with "
                 f"--set actor_lr={suggested['actor_lr']} --set "
                 f"critic_lr={suggested['critic_lr']} (today {config.actor_lr:g} and "
                 f"{config.critic_lr:g})" if before else
                 "no checkpoint from before the fall is kept (keep_checkpoints); "
                 "best_model.pt holds the best policy")
        return self.rule.fire(
            steps, round(share, 3),
            f"evaluation return {mean:.1f} is {share:.0%} of the gain below its best "
            f"{self.best:.1f} (step {self.best_step}; first evaluation {self.first:.1f}) for "
            f"{self.settings.evaluations} evaluations in a row; {where}",
            suggested_set=suggested)

    def state_dict(self) -> dict[str, Any]:
        return {"first": self.first, "best": self.best, "best_step": self.best_step,
                "below": self.below, "checkpoints": [list(c) for c in self.checkpoints],
                "returns": list(self.returns)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.first, self.best = state["first"], state["best"]
        self.best_step, self.below = int(state["best_step"]), int(state["below"])
        self.checkpoints = [(int(s), str(p)) for s, p in state["checkpoints"]]
        self.returns = deque((float(r) for r in state.get("returns", ())), maxlen=RETURNS)
