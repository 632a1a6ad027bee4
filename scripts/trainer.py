"""The training loop: env steps, updates, evaluation, checkpoints, logging.

It wires the layers together (section 4 of the source doc's `train.py`, rebuilt):
the env and the exploration produce transitions, the replay buffer stores them, the
agent learns from batches, the logger records, and checkpoints hold everything needed
to continue. Per env step the loop does one action transfer and, per update, one
transfer of a handful of scalar metrics; all file writes happen per episode or less.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rltrain.agents.ddpg import DDPGAgent
from rltrain.scripts.train_state import Counters, Episode, build_payload
from rltrain.utils.checkpoint import prune_periodic, save_checkpoint
from rltrain.utils.config import TrainConfig
from rltrain.utils.envs import make_env, space_dims
from rltrain.utils.evaluation import evaluate
from rltrain.utils.exploration import Exploration
from rltrain.utils.progress import ProgressDisplay
from rltrain.utils.replay_buffer import ReplayBuffer
from rltrain.utils.run_logger import RunLogger
from rltrain.utils.runs import RunPaths
from rltrain.utils.seeding import (
    AGENT,
    EXPLORATION,
    NETWORK_INIT,
    REPLAY,
    TRAIN_EPISODES,
    derive_seed,
)

LOSS_TAGS = {"critic_loss": "losses/critic_loss", "actor_loss": "losses/actor_loss",
             "q_mean": "losses/q_mean", "critic_grad_norm": "losses/critic_grad_norm",
             "actor_grad_norm": "losses/actor_grad_norm"}


@dataclass(frozen=True)
class RunOutcome:
    status: str  # "finished" or "paused"
    env_steps: int
    checkpoint: Path | None
    reason: str | None = None


class Trainer:
    """One run of DDPG/TD3 training, from scratch or from a checkpoint (`restore`)."""

    def __init__(self, config: TrainConfig, device: torch.device,
                 interactive: bool | None = None) -> None:
        self.config, self.device = config, device
        self.interactive = interactive
        self.paths: RunPaths | None = None
        self.env = make_env(config.env_name)
        self.eval_env = make_env(config.env_name)
        self.obs_dim, self.action_dim, low, high = space_dims(self.env)
        torch.manual_seed(derive_seed(config.seed, NETWORK_INIT))
        self.agent = DDPGAgent(self.obs_dim, low, high, config, device)
        self.agent.generator.manual_seed(derive_seed(config.seed, AGENT))
        self.buffer = ReplayBuffer(config.replay_buffer_size, self.obs_dim, self.action_dim,
                                   device, seed=derive_seed(config.seed, REPLAY))
        self.exploration = Exploration(config, low, high, derive_seed(config.seed, EXPLORATION))
        self.counters = Counters()
        self.episode: Episode | None = None
        self.logger: RunLogger | None = None
        self.loss_window: dict[str, list[float]] = {}
        self._log_mark = (time.monotonic(), 0)
        self._pause_reason: str | None = None

    # ----------------------------------------------------------------- the loop
    def run(self, paths: RunPaths, resume_step: int | None = None) -> RunOutcome:
        """Train until max_timesteps or a pause; `resume_step` when continuing a run."""
        self.paths = paths
        self.logger = RunLogger(paths, resume_step=resume_step)
        self.logger.write_run_files(self.config)
        self.progress = ProgressDisplay(self.config.max_timesteps, self.counters.env_steps,
                                        self.interactive)
        self._log_mark = (time.monotonic(), self.counters.env_steps)
        try:
            if self.episode is None:
                self.start_episode(self.counters.episodes)
            while self.counters.env_steps < self.config.max_timesteps:
                self._step()
                if self._pause_reason is not None:
                    return self._pause(self._pause_reason)
            return self._finish()
        finally:
            self.progress.close()
            self.logger.close()
            self.env.close()
            self.eval_env.close()

    def _step(self) -> None:
        """One env step and everything that is due after it."""
        self._env_step()
        steps = self.counters.env_steps
        if steps >= self.config.learning_starts and len(self.buffer) >= self.config.batch_size:
            for _ in range(self.config.utd_ratio):
                self._learn()
        if steps % self.config.log_freq == 0:
            self._log_losses()
        if steps % self.config.eval_freq == 0:
            self._evaluate()
        if steps % self.config.checkpoint_freq == 0:
            self._save_periodic()
        if steps % 100 == 0:
            self.progress.update(steps, self.counters.last_return, self.counters.best_eval)

    def _env_step(self) -> None:
        episode = self.episode
        assert episode is not None
        steps = self.counters.env_steps
        if steps < self.config.learning_starts:
            action = self.exploration.random_action()
        else:
            action = self.exploration.noisy(self.agent.act(episode.obs), steps)
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        reward = float(reward)
        self.buffer.add(episode.obs, action, reward, next_obs, terminated, truncated)
        episode.actions.append(action)
        episode.episode_return += reward
        episode.length += 1
        episode.obs = next_obs
        self.counters.env_steps += 1
        if terminated or truncated:
            self._end_episode()

    def _learn(self) -> None:
        metrics = self.agent.update(self.buffer.sample(self.config.batch_size))
        values = torch.stack(list(metrics.values())).tolist()  # one host transfer
        for name, value in zip(metrics, values, strict=True):
            self.loss_window.setdefault(name, []).append(value)

    def start_episode(self, index: int) -> None:
        obs, _ = self.env.reset(seed=derive_seed(self.config.seed, TRAIN_EPISODES, index))
        self.exploration.reset()
        self.episode = Episode(index=index, obs=obs)

    def _end_episode(self) -> None:
        episode, steps = self.episode, self.counters.env_steps
        assert episode is not None and self.logger is not None
        self.counters.episodes += 1
        self.counters.last_return = episode.episode_return
        self.logger.scalars(steps, {"train/episode_return": episode.episode_return,
                                    "train/episode_length": episode.length})
        self.logger.metric("episode", steps, episode=episode.index,
                           episode_return=episode.episode_return, length=episode.length)
        self.start_episode(self.counters.episodes)

    # ------------------------------------------------------- periodic work
    def _log_losses(self) -> None:
        assert self.logger is not None
        now, steps = time.monotonic(), self.counters.env_steps
        mark_time, mark_steps = self._log_mark
        values = {LOSS_TAGS[k]: float(np.mean(v)) for k, v in self.loss_window.items() if v}
        values["charts/steps_per_second"] = (steps - mark_steps) / max(now - mark_time, 1e-9)
        values["charts/exploration_noise"] = self.exploration.sigma(steps)
        values["charts/updates"] = float(self.agent.updates)
        self.logger.scalars(steps, values)
        self.loss_window = {}
        self._log_mark = (now, steps)

    def _evaluate(self) -> None:
        assert self.logger is not None
        steps, counters = self.counters.env_steps, self.counters
        result = evaluate(self.agent.act, self.eval_env, self.config.n_eval_episodes,
                          self.config.seed, self.config.gamma)
        counters.evaluations += 1
        self.logger.scalars(steps, {"eval/mean_return": result.mean,
                                    "eval/std_return": result.std})
        self.logger.metric("eval", steps, evaluation=counters.evaluations,
                           mean_return=result.mean, std_return=result.std,
                           returns=result.returns)
        if counters.best_eval is None or result.mean > counters.best_eval:
            counters.best_eval, counters.best_eval_step = result.mean, steps
            save_checkpoint(self.paths.best_model, self.checkpoint_payload("best"))
        self.progress.message(f"step {steps}: eval mean return {result.mean:.1f} "
                              f"+/- {result.std:.1f} (best {counters.best_eval:.1f})")

    def _save_periodic(self) -> Path:
        path = self.paths.periodic_checkpoint(self.counters.env_steps)
        save_checkpoint(path, self.checkpoint_payload("periodic"))
        prune_periodic(self.paths.checkpoint_dir, self.config.keep_checkpoints)
        return path

    def _finish(self) -> RunOutcome:
        steps = self.counters.env_steps
        path = self.paths.periodic_checkpoint(steps)
        if not path.exists():
            path = self._save_periodic()
        self.progress.message(f"training finished at step {steps}; checkpoint: {path}")
        return RunOutcome("finished", steps, path)

    def _pause(self, reason: str) -> RunOutcome:
        steps = self.counters.env_steps
        path = self.paths.paused_checkpoint(steps)
        save_checkpoint(path, self.checkpoint_payload("paused"))
        return RunOutcome("paused", steps, path, reason)

    def checkpoint_payload(self, kind: str) -> dict:
        return build_payload(self, kind)
