"""What the env and the config give the agent to learn from .

A review that planted common faults in Pendulum found runs that learn nothing while
the reward, gradient and action rules stay quiet, because the fault is in what goes
into learning, not in how the networks respond to it. These rules look there:

- `observation_scale`: an observation dimension orders of magnitude from unit scale:
  its RMS over the newest transitions, over sqrt(obs_dim), above 10^threshold. That is
  what the dimension adds to a first-layer unit at the default initialisation (weights
  of scale 1/sqrt(fan_in)), so many large dimensions among many (Humanoid's contact
  forces, RMS up to about 570 among 348: 31) count less than one among three (Pendulum's
  velocity x1000: 3685). Such a dimension drives the first layers alone, and the
  critic's targets with it; unnormalised velocities or positions in millimetres.
- `frozen_observation`: no env step changed any observation dimension over the newest
  `threshold` transitions: a `step` that returns a stale observation. Some dimensions
  unchanged are only noted (info): standard envs have them by design (Reacher's and
  Pusher's goals within an episode, Ant's and Humanoid's contact forces of bodies not
  touching anything), though a stuck sensor looks the same.
- `time_limit_terminal`: `threshold` episodes in a row ended `terminated` at one and
  the same length. A time limit reported as the task's end (instead of `truncated`) tells
  the critic that those states are worth nothing more: code that stores
  `done = terminated or truncated` does this.
- `short_horizon`: the discount's horizon 1/(1-gamma) below `threshold` of the mean
  episode length: rewards more than a few steps ahead barely count.
- `small_replay`: a replay buffer of fewer than `threshold` batches: every batch is a
  large sample of the same few, newest, correlated transitions.
- `ignored_action`: the warm-up's random actions changed neither the observations nor
  the reward by more than chance would (`action_effect.py`): the env does not apply them.

The observation checks read the replay buffer's newest rows at the first update and
every `grad_freq` updates after it (one reduction over at most `max(frozen rows, 1000)`
rows); the action's effect is measured once, at the run's first update, on the warm-up's
transitions; the episode checks keep the last `window_size` episode lengths.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Callable

import numpy as np
import torch

from rltrain.utils.config import TrainConfig
from rltrain.utils.diagnostics.action_effect import MAX_LAG, ROWS, action_effect
from rltrain.utils.replay_buffer import Batch, ReplayBuffer
from rltrain.utils.run_logger import RunLogger

MIN_EPISODES = 5  # episodes before the horizon is compared with their mean length
# Shorter episodes are not taken for time limits: a policy saturated at the action bounds
# falls at one same early step every episode (Humanoid-v5 at 12, Hopper-v5 at 6 or 21-23),
# while time limits are 50 steps (Reacher) or more.
MIN_LENGTH = 50
SCALE_ROWS = 1000  # newest transitions whose RMS is the observation scale


@torch.no_grad()
def observation_stats(obs: torch.Tensor, next_obs: torch.Tensor,
                      frozen_rows: int) -> dict[str, Any]:
    """Of transitions' `obs` and `next_obs` [N, obs_dim] (oldest first): each dimension's
    RMS over the newest SCALE_ROWS, the largest over sqrt(obs_dim) (`scale`), and the
    dimensions that no step of the newest `frozen_rows` changed (none when there are
    fewer). Comparing each step's two observations catches a constant sensor and a
    step() that returns its input alike."""
    rms = obs[-SCALE_ROWS:].double().square().mean(dim=0).sqrt()
    stats: dict[str, Any] = {"rms": rms.cpu().tolist(), "frozen": []}
    stats["scale"] = max(stats["rms"]) / math.sqrt(len(stats["rms"]))
    if len(obs) >= frozen_rows:
        moved = (next_obs[-frozen_rows:] != obs[-frozen_rows:]).any(dim=0)
        stats["frozen"] = (~moved).nonzero().flatten().cpu().tolist()
    return stats


class EpisodeEnds:
    """How the last episodes ended: their lengths (bounded) and the current run of
    episodes that ended `terminated` at one same length."""

    def __init__(self, window: int) -> None:
        self.lengths: deque[int] = deque(maxlen=window)
        self.streak, self.streak_length = 0, 0

    def add(self, length: int, terminated: bool) -> None:
        self.lengths.append(length)
        if not terminated or length < MIN_LENGTH:
            self.streak = 0
        elif length == self.streak_length and self.streak:
            self.streak += 1
        else:
            self.streak, self.streak_length = 1, length

    def horizon_share(self, gamma: float) -> float | None:
        """1/(1-gamma) over the mean episode length (None: too few episodes, or gamma 1)."""
        if len(self.lengths) < MIN_EPISODES or gamma >= 1.0:
            return None
        return 1.0 / (1.0 - gamma) / float(np.mean(self.lengths))

    def state_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "streak": self.streak,
                "streak_length": self.streak_length}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lengths.clear()
        self.lengths.extend(state["lengths"])
        self.streak, self.streak_length = state["streak"], state["streak_length"]


Report = Callable[..., None]  # (rule, env_steps, value, message, observation=False)


class InputChecks:
    """The six rules above; `finding(rule, env_steps, value, message[, observation])`
    reports one (`observation`: info only)."""

    def __init__(self, config: TrainConfig, buffer: ReplayBuffer, logger: RunLogger,
                 finding: Report) -> None:
        self.config, self.settings = config, config.diagnostics
        self.buffer, self.logger, self.finding = buffer, logger, finding
        self.episodes = EpisodeEnds(self.settings.window_size)
        self.started = False  # this process has updated: checked again after a resume
        self.effect: dict[str, Any] | None = None  # the action's, measured at update 1

    def on_episode_end(self, env_steps: int, length: int, terminated: bool) -> None:
        s = self.settings
        self.episodes.add(length, terminated)
        if self.episodes.streak >= s.time_limit_terminal.threshold:
            self.finding("time_limit_terminal", env_steps, self.episodes.streak,
                         f"the last {self.episodes.streak} episodes all ended `terminated` "
                         f"at exactly {self.episodes.streak_length} steps: if that is a time "
                         "limit, the critic learns that nothing follows those states")
        share = self.episodes.horizon_share(self.config.gamma)
        if share is not None and share < s.short_horizon.threshold:
            horizon = 1.0 / (1.0 - self.config.gamma)
            self.finding("short_horizon", env_steps, round(share, 4),
                         f"gamma {self.config.gamma:g} looks about {horizon:.3g} steps ahead, "
                         f"{share:.1%} of the mean episode length "
                         f"{np.mean(self.episodes.lengths):.0f}")

    def after_update(self, env_steps: int, updates: int) -> None:
        """The replay size and the action's effect at the first update of this process
        (so again after a resume: neither can change there; the effect is measured at the
        run's first update, on the warm-up, and kept); the observations at the run's first
        update and every grad_freq updates after it."""
        if not self.started:
            self.started = True
            self._check_replay(env_steps)
            if updates == 1:
                self._measure_action_effect(env_steps)
            self._check_action_effect(env_steps)
        if (updates - 1) % self.settings.grad_freq == 0:
            self._check_observations(env_steps)

    def _check_replay(self, env_steps: int) -> None:
        batches = self.config.replay_buffer_size / self.config.batch_size
        if batches < self.settings.small_replay.threshold:
            self.finding("small_replay", env_steps, round(batches, 2),
                         f"the replay buffer's capacity is {self.config.replay_buffer_size} "
                         f"transitions, {batches:.3g} batches of {self.config.batch_size}: "
                         "the batches keep drawing on the same few, newest transitions")

    def _warmup(self, env_steps: int) -> Batch | None:
        """At the first update: the newest ROWS transitions of the warm-up's random
        actions, in the order they were taken (None: fewer). Rows added after the warm-up
        (learning_starts below batch_size) are left out."""
        warmup = min(len(self.buffer), self.config.learning_starts)
        if warmup < ROWS:
            return None
        later = min(len(self.buffer) - warmup, max(0, env_steps - self.config.learning_starts))
        return Batch(*(column[warmup - ROWS:warmup]
                       for column in self.buffer.newest(warmup + later)))

    def _measure_action_effect(self, env_steps: int) -> None:
        warmup = self._warmup(env_steps)
        self.effect = None if warmup is None else action_effect(warmup, self.config.num_envs)
        self.logger.diagnostic("action_effect", env_steps, **(self.effect or {
            "action_effect": None, "rows": min(len(self.buffer), self.config.learning_starts),
            "why": f"fewer than {ROWS} warm-up transitions (learning_starts)"}))

    def _check_action_effect(self, env_steps: int) -> None:
        effect, threshold = self.effect, self.settings.ignored_action.threshold
        if effect is None or not effect["observations_moved"]:  # frozen_observation's case
            return
        idle = [d for d, e in enumerate(effect["per_dimension"]) if e < threshold]
        echoed = (f"; observation(s) {effect['echoes']} repeat the action and do not count"
                  if effect["echoes"] else "")
        if len(idle) == len(effect["per_dimension"]):
            self.finding("ignored_action", env_steps, effect["action_effect"],
                         f"the warm-up's {effect['rows']} random actions changed neither the "
                         f"observations nor the reward more than chance would, within "
                         f"{MAX_LAG} steps (strongest link {effect['action_effect']:.2f} of "
                         f"chance's){echoed}: does the env apply the action?")
        elif idle:  # an action input unused by design looks the same
            self.finding("ignored_action", env_steps, idle,
                         f"action dimension(s) {idle} of {len(effect['per_dimension'])} "
                         "changed neither the observations nor the reward more than chance "
                         f"would in the warm-up{echoed}", observation=True)

    def _check_observations(self, env_steps: int) -> None:
        # A buffer smaller than the threshold is judged once it is full.
        frozen_rows = max(1, min(int(self.settings.frozen_observation.threshold),
                                 self.buffer.capacity))
        rows = min(len(self.buffer), max(frozen_rows, SCALE_ROWS))
        batch = self.buffer.newest(rows)
        stats = observation_stats(batch.obs, batch.next_obs, frozen_rows)
        rms, frozen = stats["rms"], stats["frozen"]
        self.logger.diagnostic("inputs", env_steps, observation_rms=rms,
                               observation_scale=stats["scale"],
                               frozen=frozen if rows >= frozen_rows else None, rows=rows)
        worst = int(np.argmax(rms))
        if stats["scale"] > 10.0 ** self.settings.observation_scale.threshold:
            self.finding("observation_scale", env_steps, round(stats["scale"], 4),
                         f"observation dimension {worst} has RMS {rms[worst]:.3g} over the "
                         f"newest {min(rows, SCALE_ROWS)} transitions ({stats['scale']:.3g} "
                         f"over sqrt({len(rms)}) dimensions): it drives the first layers and "
                         "the critic's targets alone")
        if len(frozen) == len(rms):
            self.finding("frozen_observation", env_steps, frozen,
                         f"no env step changed any of the {len(rms)} observation dimensions "
                         f"over the newest {frozen_rows} transitions: the agent cannot see "
                         "its state move")
        elif frozen:  # goals, contact forces of bodies not touching: often by design
            named = f"{frozen[:10]}" + (f" and {len(frozen) - 10} more" if len(frozen) > 10
                                        else "")
            self.finding("frozen_observation", env_steps, frozen,
                         f"observation dimension(s) {named} of {len(rms)}: no env step "
                         f"changed them over the newest {frozen_rows} transitions",
                         observation=True)

    def state_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes.state_dict(), "action_effect": self.effect}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episodes.load_state_dict(state["episodes"])
        self.effect = state.get("action_effect")  # None: saved before it was measured
