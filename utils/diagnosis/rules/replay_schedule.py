"""When a replayed run learns from its transitions: `learning_not_started` and
`update_schedule` (the families that replay: DDPG, TD3, SAC and their kin, DQN).

- `learning_not_started` (judged once, at the first episode's end, where that comes
  before learning has started: a continued run's warm-up is over): the random warm-up
  (`learning_starts`) takes at least `threshold` of the run's budget (SB3's
  `total_timesteps` where the run is SB3's: a warm-up past it is allowed there, and the
  run never learns). Every step of the warm-up is a step of random actions the run
  does not learn from; RL Zoo's tuned DQN entries start learning within 0-2% of their
  budgets (SB3's DQN default 100 steps; RL Zoo's CartPole and MountainCar DQN 1,000 of
  50,000 and 120,000), its Pendulum DDPG and TD3 (rltrain's shipped configs) at half
  of a 20,000-step budget: the threshold is above that.
- `update_schedule`: once learning has started, the transitions are replayed under
  `threshold` times each on average: gradient steps times the batch size over the
  transitions collected since learning started (the replay ratio; Fedus et al., 2020,
  "Revisiting Fundamentals of Experience Replay"), judged once at least `min_steps` of
  them are in and again every `min_steps` after.
  Tuned runs replay each transition 8 times (SB3's DQN defaults: one step of 32 per 4
  env steps) to hundreds (rltrain's one update of 256 per env step); under once, most
  transitions are never learnt from and the run learns at a fraction of its pace (a
  train_freq far larger than the gradient_steps it runs, an update every few thousand
  steps).

The changes proposed are SB3's names where the run is SB3's (`learning_starts`,
`train_freq`, `gradient_steps`; rltrain's `learning_starts` is the same key).
"""

from __future__ import annotations

from typing import Any

from rltrain.agents.families import REPLAYED
from rltrain.utils.config.fields import NON_NEGATIVE
from rltrain.utils.diagnosis.rules.on_policy_rules import library_setting
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Update

USUAL_START_SHARE = 0.02  # the warm-up proposed, as a share of the budget (RL Zoo's DQN)
USUAL_REUSE = 8.0  # replays per transition proposed: SB3's DQN defaults (1 x 32 per 4)

SPECS = (
    RuleSpec(
        name="learning_not_started", section="diagnostics", group="Training set-up",
        algorithms=REPLAYED, threshold=0.75, action="warn",
        fires_when="the random warm-up (learning_starts) takes at least this share of the "
                   "run's budget (SB3: total_timesteps)",
        hypothesis="if learning_starts is set near or past the run's budget, then most or "
                   "all of the run acts at random and learns nothing",
        check="start learning within a few percent of the budget (RL Zoo: 0-2%)"),
    RuleSpec(
        name="update_schedule", section="diagnostics", group="Training set-up",
        algorithms=REPLAYED, threshold=1.0, action="warn",
        fires_when="once learning has started, the gradient steps times the batch size over "
                   "the transitions collected since are under this (each transition replayed "
                   "under this many times on average), over at least `min_steps` transitions",
        hypothesis="if the run updates far too rarely for what it collects (a train_freq far "
                   "larger than its gradient_steps), then most transitions are never learnt "
                   "from and the run learns at a fraction of its pace",
        check="run about one gradient step per 1-4 env steps (SB3: train_freq 4, "
              "gradient_steps 1, or gradient_steps -1)",
        options=(Option("min_steps", 5000, "transitions collected after learning started "
                        "before the schedule is judged", NON_NEGATIVE),)),
)


def budget(config: Any) -> int:
    """The env steps the run is to take: SB3's total_timesteps where recorded (rltrain's
    max_timesteps for an SB3 run is never under its learning_starts)."""
    total = library_setting(config, "total_timesteps")
    return int(total) if isinstance(total, (int, float)) and total > 0 else int(
        config.max_timesteps)


class LearningNotStarted(RuleHook):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.judged = False

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        if self.judged:
            return []
        self.judged = True
        config = self.context.config
        start, total = int(config.learning_starts), budget(config)
        if episode.env_steps >= start:  # learning has started (a continued run)
            return []
        share = start / max(total, 1)
        self.record(episode.env_steps, share=round(share, 4))
        if share < self.rule.threshold:
            return []
        proposed = max(int(round(total * USUAL_START_SHARE, -2)), 100)
        where = ("past the run's budget: it never learns" if start >= total else
                 f"{share:.0%} of the run's budget: most of it acts at random")
        return self.fire(
            episode.env_steps, round(share, 4),
            f"learning_starts {start} is {where} (a budget of {total} env steps); "
            f"start learning within a few percent of it: learning_starts {proposed}",
            suggested_set={"learning_starts": proposed})

    def state_dict(self) -> dict[str, Any]:
        return {"judged": self.judged}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.judged = bool(state["judged"])


class UpdateSchedule(RuleHook):
    spec = SPECS[1]
    update_batches = True

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.updates = 0  # gradient steps so far (the newest update's count)
        self.fired = False
        self.judged_at = 0  # the collected transitions at the last judgement

    def on_update(self, update: Update) -> list[Finding]:
        """A batch's updates (`update_batches`) as one by one: only the first of them
        can judge (they share the env step), with its own count."""
        self.updates = update.first
        found = self._judge(update.env_steps)
        self.updates = update.updates
        return found

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        return self._judge(episode.env_steps)  # also where no update comes at all

    def _judge(self, env_steps: int) -> list[Finding]:
        config = self.context.config
        collected = env_steps - int(config.learning_starts)
        every = max(self.settings.min_steps, 1)
        if self.fired or collected < self.judged_at + every:
            return []
        self.judged_at = collected
        reuse = self.updates * int(config.batch_size) / collected
        self.record(env_steps, reuse=round(reuse, 4))
        if reuse >= self.rule.threshold:
            return []
        self.fired = True
        return self.fire(
            env_steps, round(reuse, 4),
            f"{self.updates} gradient steps of {config.batch_size} transitions for the "
            f"{collected} collected since learning started: each transition is replayed "
            f"{reuse:.2g} times on average, most are never learnt from; "
            + self._fix_text(), suggested_set=self._fix())

    def _fix(self) -> dict[str, Any]:
        """SB3's train_freq counts steps of all its envs at once: one gradient step per
        batch / USUAL_REUSE transitions of them."""
        config = self.context.config
        freq = library_setting(config, "train_freq")
        if isinstance(freq, list) and freq and isinstance(freq[0], int):
            per_step = max(int(library_setting(config, "n_envs", 1) or 1), 1)
            batch = int(config.batch_size)
            return {"train_freq": max(int(batch / (USUAL_REUSE * per_step)), 1),
                    "gradient_steps": 1}
        return {}

    def _fix_text(self) -> str:
        fix = self._fix()
        if fix:
            return (f"train_freq {fix['train_freq']} with gradient_steps 1 replays each "
                    f"transition about {USUAL_REUSE:g} times")
        return "run about one gradient step per 1-4 env steps"

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "fired": self.fired, "judged_at": self.judged_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates, self.fired = int(state["updates"]), bool(state["fired"])
        self.judged_at = int(state.get("judged_at", 0))


CHECKS = (LearningNotStarted, UpdateSchedule)
