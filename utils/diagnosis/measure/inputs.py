"""What the env and the config give the agent to learn from .

A review that planted common faults in Pendulum found runs that learn nothing while
the reward, gradient and action rules stay quiet, because the fault is in what goes
into learning, not in how the networks respond to it. Six rules look there
(utils/diagnosis/rules/input_rules.py says what each one judges, and why); this module measures
what they judge and hands it to them.

The observation checks read the replay buffer's newest rows at the first update and
every `grad_freq` updates after it (one reduction over at most `max(frozen rows, 1000)`
rows); the action's effect is measured once, at the run's first update, on the warm-up's
transitions, or, after a warm-up of fewer than ROWS steps, on the first ROWS steps after
it whose exploration noise reached the env (Step.noise); the episode checks keep the
last `window_size` episode lengths.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from rltrain.agents.registry import algorithm
from rltrain.utils.config.schema import training_envs
from rltrain.utils.diagnosis.measure.action_effect import MAX_ROWS, ROWS, action_effect
from rltrain.utils.diagnosis.measure.episode_ends import EpisodeEnds
from rltrain.utils.diagnosis.rules import episode_rules, input_rules
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Step, Steps
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import Batch, ReplayBuffer

SCALE_ROWS = 1000  # newest transitions whose RMS is the observation scale
# Added action noise below this std (of the half-range) is not judged by: its pushes fall
# into dead zones (benchmarks/noise_effect.py: LunarLanderContinuous at 0.1 scored 1.08).
MIN_NOISE = 0.3


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


class InputChecks:
    """The statistics of the six rules above, handed to their checks
    (utils/diagnosis/rules/input_rules.py); `report` takes the findings they return."""

    def __init__(self, context: RuleContext, buffer: ReplayBuffer, logger: RunLogger,
                 report: Callable[[list[Finding]], None]) -> None:
        self.config = context.config
        self.view = context.view  # a watched loop's done flags (`stored_dones`)
        self.settings = self.config.diagnostics
        self.buffer, self.logger, self.report = buffer, logger, report
        self.rules = {cls.spec.name: cls(context)
                      for cls in (*input_rules.CHECKS, *episode_rules.CHECKS)}
        self.episodes = EpisodeEnds(self.settings.window_size)
        self.started = False  # this process has updated: checked again after a resume
        self.effect: dict[str, Any] | None = None  # the action's, measured at update 1
        self._never: bool | None = None  # no effect can be judged here (`_judged`)
        # After a short warm-up: the steps with exploration noise (Explored), and how many
        # steps after the warm-up had none.
        self.explored = Explored()
        self.silent = self.clipped = 0

    def on_step(self, step: Step) -> None:
        """After a warm-up too short to judge: keep the first ROWS steps that carry
        exploration noise, and judge the action's effect on them."""
        if self._judged() or step.env_steps <= self.config.learning_starts:
            return
        if step.noise is None or not step.stored:
            self.silent += step.noise is None
            return
        if np.isnan(step.noise).any():  # an action at the bounds: the noise was clipped away
            self.clipped += 1
            return
        if self.explored.add(step) < ROWS:
            return
        self.effect = self.explored.effect(training_envs(self.config))
        self.explored = Explored()  # judged: the rows are no longer needed
        self.logger.diagnostic("action_effect", step.env_steps, **self.effect)
        self.report(self.rules["ignored_action"].check(step.env_steps, self.effect))

    def on_steps(self, steps: Steps) -> None:
        """A vector step's steps, as `on_step` of each (counted at once where they carry
        no noise)."""
        if steps.noise is not None:
            for step in steps.each():
                self.on_step(step)
        elif not self._judged():  # steps after the warm-up: none can be judged
            self.silent += max(steps.env_steps - max(steps.first - 1,
                                                     self.config.learning_starts), 0)

    def _judged(self) -> bool:
        """Whether the action's effect is judged already, or will never be here."""
        if self._never is None:  # the settings' part, known once
            self._never = (self.config.learning_starts >= ROWS
                           or self.noise_too_small() is not None
                           or self.rules["ignored_action"].rule.action == "off")
        return self.effect is not None or self._never

    def on_episode_end(self, env_steps: int, length: int, terminated: bool) -> None:
        episodes = self.episodes
        episodes.add(length, terminated)
        if env_steps <= self.config.learning_starts:  # an episode of random actions
            episodes.warmup.append(length)
        self.report(self.rules["time_limit_terminal"].check(env_steps, episodes.streak,
                                                            episodes.streak_length)
                    + self.rules["short_horizon"].check(
                        env_steps, episodes.horizon_share(self.config.gamma), episodes.lengths)
                    + self.rules["short_episodes"].check(env_steps, episodes.lengths,
                                                         episodes.terminated, episodes.warmup))

    def after_update(self, env_steps: int, updates: int) -> None:
        """The replay size and the action's effect at the first update of this process
        (so again after a resume: neither can change there; the effect is measured at the
        run's first update, on the warm-up, and kept); the observations at the run's first
        update and every grad_freq updates after it."""
        if not self.started:
            self.started = True
            self.report(self.rules["small_replay"].check(env_steps))
            if updates == 1 and self.rules["ignored_action"].spec.judges(self.config.algo):
                self._measure_action_effect(env_steps)
            self.report(self.rules["ignored_action"].check(env_steps, self.effect))
        if (updates - 1) % self.settings.grad_freq == 0 and len(self.buffer):
            self._check_observations(env_steps)  # none kept: every step was NaN/inf
        if self.view is not None and self.view.stored_dones is not None:
            self.report(self.rules["time_limit_terminal"].stored(
                env_steps, self.view.stored_dones(), self.view.stored_dones_fix))

    def _warmup(self, env_steps: int) -> Batch | None:
        """At the first update: the newest MAX_ROWS transitions of the warm-up's random
        actions (all of them if fewer), in the order they were taken (None: fewer than
        ROWS). Rows added after the warm-up (learning_starts below batch_size) are left
        out."""
        warmup = min(len(self.buffer), self.config.learning_starts)
        if warmup < ROWS:
            return None
        rows = min(warmup, MAX_ROWS)
        later = min(len(self.buffer) - warmup, max(0, env_steps - self.config.learning_starts))
        return Batch(*(column[warmup - rows:warmup]
                       for column in self.buffer.newest(warmup + later)))

    def _measure_action_effect(self, env_steps: int) -> None:
        warmup = self._warmup(env_steps)
        self.effect = None if warmup is None else action_effect(warmup, training_envs(self.config))
        self.logger.diagnostic("action_effect", env_steps, **(self.effect or {
            "action_effect": None, "rows": min(len(self.buffer), self.config.learning_starts),
            "why": f"fewer than {ROWS} warm-up transitions (learning_starts)"}))

    def _check_observations(self, env_steps: int) -> None:
        frozen_rows = self.rules["frozen_observation"].rows(self.buffer.capacity)
        rows = min(len(self.buffer), max(frozen_rows, SCALE_ROWS))
        batch = self.buffer.newest(rows)
        stats = observation_stats(batch.obs, batch.next_obs, frozen_rows)
        rms, frozen = stats["rms"], stats["frozen"]
        self.logger.diagnostic("inputs", env_steps, observation_rms=rms,
                               observation_scale=stats["scale"],
                               frozen=frozen if rows >= frozen_rows else None, rows=rows)
        self.report(self.rules["observation_scale"].check(env_steps, stats, rows, SCALE_ROWS)
                    + self.rules["frozen_observation"].check(env_steps, frozen, len(rms),
                                                             frozen_rows))

    def noise_too_small(self) -> str | None:
        """Why added action noise is too small to judge by (None: large enough, or the
        policy samples its own): its std below MIN_NOISE of the half-range."""
        config = self.config
        if not algorithm(config.algo).adds_action_noise or config.exploration_noise == 0:
            return None  # none: the steps say they carry no noise
        size = config.exploration_noise
        if config.noise_type == "ou":
            size /= math.sqrt(2 * config.ou_theta)
        if size >= MIN_NOISE:
            return None
        return (f"the exploration noise after it ({size:.2g} of the half-range) is too "
                f"small to tell (it needs {MIN_NOISE}; LunarLanderContinuous's engines "
                "ignore small pushes): set learning_starts >= "
                f"{ROWS}, or exploration_noise >= {MIN_NOISE}")

    def unjudged(self) -> dict[str, str]:
        """The input rules that could not judge the run (see RuleCheck.unjudged)."""
        rule = self.rules["ignored_action"]
        if rule.rule.action == "off" or self.effect is not None:
            return {}
        warmup = self.config.learning_starts
        if warmup >= ROWS:
            return {"ignored_action": "no update yet"}
        why = (f"a random warm-up of {warmup} env steps (it needs {ROWS}, learning_starts); "
               f"of the {ROWS} steps with exploration noise after it that it judges instead, "
               f"{len(self.explored)} so far ({self.clipped} more, whose policy action sat "
               "at the bounds, which clip the noise away, do not count)")
        small = self.noise_too_small()
        if small is not None:
            why = (f"a random warm-up of {warmup} env steps (it needs {ROWS}, "
                   f"learning_starts), and {small}")
        elif self.silent and not len(self.explored) and self.config.num_workers:
            why = (f"a random warm-up of {warmup} env steps (it needs {ROWS}, learning_starts), "
                   "and env runners (num_workers) do not hand on their exploration noise: set "
                   f"learning_starts >= {ROWS}")
        elif (self.silent and not len(self.explored) and self.config.noise_type == "ou"
              and self.config.exploration_noise > 0):
            why = (f"a random warm-up of {warmup} env steps (it needs {ROWS}, learning_starts), "
                   f"and the {self.silent} actions after it carry Ornstein-Uhlenbeck noise, "
                   "which the library does not hand on (each draw depends on the last ones): "
                   "explore with independent noise (SB3: action_noise=NormalActionNoise(...)), "
                   f"or set learning_starts >= {ROWS}")
        elif self.silent and not len(self.explored):
            why = (f"a random warm-up of {warmup} env steps (it needs {ROWS}, learning_starts), "
                   f"and the {self.silent} actions after it carry no exploration noise to "
                   "judge by: explore with action noise (SB3: "
                   f"action_noise=NormalActionNoise(...)), or set learning_starts >= {ROWS}")
        return {"ignored_action": why}

    def state_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes.state_dict(), "action_effect": self.effect,
                "explored": self.explored.state_dict(), "silent": self.silent,
                "clipped": self.clipped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episodes.load_state_dict(state["episodes"])
        self.effect = state.get("action_effect")  # None: saved before it was measured
        self.explored.load_state_dict(state.get("explored", {}))  # absent: written before
        self.silent = int(state.get("silent", 0))
        self.clipped = int(state.get("clipped", 0))


class Explored:
    """Steps with exploration noise, in the order they were taken: obs, the action, its
    noise, what the state decided of it, the reward and next_obs; at most `capacity`
    (ROWS, all the rule judges). Each field's rows are one float64 array allocated at the
    first step: a tensor per field and step, kept while the updates in between allocate
    and free their batches, scattered the heap: resident memory grew at every step of the
    collection and was not given back (CHANGELOG.md has the figures)."""

    FIELDS = ("obs", "action", "noise", "steered", "reward", "next_obs")

    def __init__(self, capacity: int = ROWS) -> None:
        self.capacity = capacity
        self.arrays: dict[str, np.ndarray] = {}  # field -> [capacity, width], once a step came
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, step: Step) -> int:
        assert self.size < self.capacity, "Explored is full: judge it, then start afresh"
        for name in self.FIELDS:
            value = np.asarray(getattr(step, name), dtype=np.float64).reshape(-1)
            if name not in self.arrays:
                self.arrays[name] = np.empty((self.capacity, value.size))
            self.arrays[name][self.size] = value
        self.size += 1
        return self.size

    def _rows(self, name: str) -> torch.Tensor:
        return torch.from_numpy(self.arrays[name][:self.size])

    def effect(self, stride: int) -> dict[str, Any]:
        """action_effect of the noise, with the observation and the steered action as
        controls."""
        obs, actions, noise, steered, rewards, next_obs = map(self._rows, self.FIELDS)
        batch = Batch(obs, actions, rewards, next_obs, torch.zeros_like(rewards))
        return {**action_effect(batch, stride, noise, torch.cat([obs, steered], dim=1)),
                "judged_on": "exploration noise"}

    def state_dict(self) -> dict[str, Any]:
        return {name: self._rows(name).clone() if self.size else None
                for name in self.FIELDS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = {name: state.get(name) for name in self.FIELDS}
        self.arrays, self.size = {}, 0
        if any(rows is None for rows in saved.values()):
            return
        self.size = min(min(len(rows) for rows in saved.values()), self.capacity)
        for name, rows in saved.items():
            rows = rows.double().reshape(len(rows), -1).numpy()
            self.arrays[name] = np.empty((self.capacity, rows.shape[1]))
            self.arrays[name][:self.size] = rows[:self.size]
