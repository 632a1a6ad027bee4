"""Training metrics as a hook: episode returns and lengths per episode, losses and
throughput every `log_freq` env steps, to TensorBoard and metrics.jsonl.

Losses are averaged over the updates since the last log line; that window is part of
a checkpoint (`loss_window`), so a resumed run writes the same next line.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rltrain.utils.findings import Finding
from rltrain.utils.hooks import EpisodeEnd, Hook, Update
from rltrain.utils.run_logger import RunLogger

LOSS_TAGS = {"critic_loss": "losses/critic_loss", "actor_loss": "losses/actor_loss",
             "q_mean": "losses/q_mean", "critic_grad_norm": "losses/critic_grad_norm",
             "actor_grad_norm": "losses/actor_grad_norm"}


class RunMetrics(Hook):
    """`exploration` gives the noise scale; `diagnostics` its own time (`seconds`)."""

    name = "metrics"

    def __init__(self, logger: RunLogger, log_freq: int, exploration: Any, diagnostics: Any,
                 env_steps: int, updates: int, loss_window: dict[str, list[float]]) -> None:
        self.logger, self.log_freq = logger, log_freq
        self.exploration, self.diagnostics = exploration, diagnostics
        self.updates = updates
        self.loss_window = loss_window
        self._mark = (time.monotonic(), env_steps, diagnostics.seconds)

    def on_update(self, update: Update) -> list[Finding]:
        self.updates = update.updates
        for name, value in update.metrics.items():
            self.loss_window.setdefault(name, []).append(value)
        return []

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        steps = episode.env_steps
        self.logger.scalars(steps, {"train/episode_return": episode.episode_return,
                                    "train/episode_length": episode.length})
        left_out = {"non_finite_rewards": episode.non_finite_rewards} \
            if episode.non_finite_rewards else {}
        self.logger.metric("episode", steps, episode=episode.index,
                           episode_return=episode.episode_return, length=episode.length,
                           terminated=episode.terminated, **left_out)
        return []

    def on_step_end(self, env_steps: int) -> list[Finding]:
        """After a step's updates: the loss line, when due."""
        if env_steps % self.log_freq:
            return []
        now = time.monotonic()
        mark_time, mark_steps, mark_diagnostics = self._mark
        elapsed = max(now - mark_time, 1e-9)
        values = {LOSS_TAGS[k]: float(np.mean(v)) for k, v in self.loss_window.items() if v}
        values["charts/steps_per_second"] = (env_steps - mark_steps) / elapsed
        values["charts/diagnostics_time_share"] = (
            self.diagnostics.seconds - mark_diagnostics) / elapsed
        values["charts/exploration_noise"] = self.exploration.sigma(env_steps)
        values["charts/updates"] = float(self.updates)
        self.logger.scalars(env_steps, values)
        self.loss_window.clear()
        self._mark = (now, env_steps, self.diagnostics.seconds)
        return []
