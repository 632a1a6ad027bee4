"""Training metrics as a hook: episode returns and lengths per episode, losses and
throughput every `log_freq` env steps, to TensorBoard and metrics.jsonl.

Tags use Stable-Baselines3's names where SB3 logs the same quantity
(`rollout/ep_rew_mean`, `rollout/ep_len_mean`, `train/actor_loss`, `train/critic_loss`,
`train/n_updates`, `time/fps`); rltrain's extras sit in the same groups, but for each
training episode's return: CleanRL's `charts/episodic_return`, whose group sorts first
in TensorBoard, so that the first card a run shows is a return. As in SB3,
`rollout/ep_rew_mean` and `rollout/ep_len_mean` are means over the last 100 episodes,
written at each log line once an episode has ended.

Losses are averaged over the updates since the last log line; that window and the
last 100 episodes are part of a checkpoint (`loss_window`, `recent_episodes`), so a
resumed run writes the same next line.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Hook, Update
from rltrain.utils.run.logger import RunLogger

RECENT_EPISODES = 100  # SB3's window for rollout/ep_rew_mean and rollout/ep_len_mean


def recent_episodes(pairs: Any = ()) -> deque[tuple[float, int]]:
    """The (return, length) of the last `RECENT_EPISODES` episodes, oldest first."""
    return deque(((float(r), int(n)) for r, n in pairs), maxlen=RECENT_EPISODES)


class RunMetrics(Hook):
    """`exploration` gives the noise scale; `diagnostics` its own time (`seconds`)."""

    name = "metrics"

    def __init__(self, logger: RunLogger, log_freq: int, exploration: Any, diagnostics: Any,
                 env_steps: int, updates: int) -> None:
        self.logger, self.log_freq = logger, log_freq
        self.step_end_every = log_freq
        self.exploration, self.diagnostics = exploration, diagnostics
        self.updates = updates
        self.loss_window: dict[str, list[float]] = {}
        self.episodes = recent_episodes()
        self._mark = (time.monotonic(), env_steps, diagnostics.seconds)

    def state_dict(self) -> dict[str, Any]:
        return {"losses": {k: list(v) for k, v in self.loss_window.items()},
                "recent_episodes": [list(x) for x in self.episodes]}  # (return, length)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loss_window = {k: list(v) for k, v in state["losses"].items()}
        # Written before rollout/ep_rew_mean: its mean starts over from the resumed step.
        self.episodes = recent_episodes(state.get("recent_episodes", ()))

    update_batches = True  # a batch's metrics count once per update it holds

    def on_update(self, update: Update) -> list[Finding]:
        self.updates = update.updates
        for name, value in update.metrics.items():
            self.loss_window.setdefault(name, []).extend([value] * update.count)
        return []

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        steps = episode.env_steps
        self.episodes.append((episode.episode_return, episode.length))
        self.logger.scalars(steps, {"charts/episodic_return": episode.episode_return,
                                    "rollout/episode_length": episode.length})
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
        # Every metric the update reports, under train/ (SAC's ent_coef and entropy too)
        values = {f"train/{k}": float(np.mean(v)) for k, v in self.loss_window.items() if v}
        if self.episodes:
            count = len(self.episodes)
            values["rollout/ep_rew_mean"] = sum(r for r, _ in self.episodes) / count
            values["rollout/ep_len_mean"] = sum(n for _, n in self.episodes) / count
        values["time/fps"] = (env_steps - mark_steps) / elapsed
        values["time/diagnostics_share"] = (
            self.diagnostics.seconds - mark_diagnostics) / elapsed
        if getattr(self.exploration, "action_noise", True):  # none for SAC: its entropy
            values["train/exploration_noise"] = self.exploration.sigma(env_steps)
        values["train/n_updates"] = float(self.updates)
        self.logger.scalars(env_steps, values)
        self.loss_window.clear()
        self._mark = (now, env_steps, self.diagnostics.seconds)
        return []
