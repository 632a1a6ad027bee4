"""Watcher: rltrain's health rules and diagnostics for a training loop of your own.

A CleanRL-style loop calls it at the points every loop has: after an env step
(`after_env_step`), after an update (`after_update`), after an evaluation (`after_eval`,
or `evaluate(env)`, which runs rltrain's own). Each call returns the findings it made;
`should_pause` says a rule (or `rltrain pause RUN` from another terminal) asks the loop
to stop, and `pause()` then saves the networks and records why; a Watcher given
`continue_from=` that file goes on with the run in its folder. Gradients are read as
each optimiser steps with them (integrations/views.py `StepGradients`). What the
networks must map, by the family of the config's `algo` (an actor and Q critics; a
categorical policy and V; a Q network), is integrations/watcher_views.py's; see
docs/integrations.md.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rltrain.agents.families import ON_POLICY
from rltrain.agents.registry import ALGORITHMS, algorithm
from rltrain.integrations.continued import Continuation, check_continuable, from_logs
from rltrain.integrations.sampled_batches import SampledBatches
from rltrain.integrations.session import Session, session_config
from rltrain.integrations.views import StepGradients
from rltrain.integrations.watcher_views import loop_networks, loop_view
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.diagnosis.rules.health.non_finite import finite_rows
from rltrain.utils.errors import ConfigError, UserError
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.io.checkpoint import load_tensors, save_tensors
from rltrain.utils.run.folders import RunPaths, paths_for
from rltrain.utils.run.progress import say
from rltrain.utils.run.status import read_status
from rltrain.utils.seeding import REPLAY, derive_seed
from rltrain.utils.training.replay_buffer import ReplayBuffer

# The diagnostics read the newest rows of a buffer (up to the warm-up plus a few
# thousand): the Watcher keeps that many itself, not the loop's whole buffer.
KEPT_ROWS = 10_000
INTEGRATION = "plain PyTorch loop (rltrain.integrations.Watcher)"  # status.json's


def box_dims(observation_space: Any, action_space: Any) -> tuple[int, int]:
    """obs_dim and action_dim of flat Box spaces; anything else is a ConfigError."""
    if not isinstance(action_space, spaces.Box) or len(action_space.shape) != 1:
        raise ConfigError(f"rltrain watches continuous control: the action space must be a "
                          f"1-D Box, not {action_space}")
    return observation_dim(observation_space), int(action_space.shape[0])


def observation_dim(observation_space: Any) -> int:
    """obs_dim of a flat Box space; anything else is a ConfigError."""
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        raise ConfigError(f"the observation space must be a 1-D Box, not {observation_space}")
    return int(observation_space.shape[0])


class Watcher:
    """Watches one run of a plain PyTorch loop; writes the run folder rltrain writes."""

    def __init__(self, actor: nn.Module | None, critic: nn.Module | Sequence[nn.Module],
                 observation_space: gym.Space, action_space: gym.Space,
                 run_name: str | None = None, log_dir: str = "logs",
                 checkpoint_dir: str = "checkpoints",
                 config: Mapping[str, Any] | None = None,
                 actor_target: nn.Module | None = None,
                 critic_target: nn.Module | Sequence[nn.Module] | None = None,
                 continue_from: str | Path | None = None) -> None:
        """`config`: rltrain config keys; `algo` says what the loop trains (ddpg when not
        given; ppo, a2c and dqn too: the networks each needs are watcher_views.py's);
        those of the loop itself (gamma, batch_size, learning_starts,
        replay_buffer_size, max_timesteps, num_envs, seed, env_name, tau) make the checks
        fit it; the rest set rule thresholds and actions. `actor_target`,
        `critic_target`: the loop's target networks (the critic's as many as the
        critic's), for the target_update rule, which judges how the critic's target
        follows the critic (none given: not judged). `continue_from`: the file a pause
        of run `run_name` saved; the run goes on in its folder from that env step."""
        obs_dim = observation_dim(observation_space)
        self.config = c = session_config({**_defaults(config), **dict(config or {})}, {
            "run_name": run_name, "log_dir": log_dir, "checkpoint_dir": checkpoint_dir})
        entry = algorithm(c.algo)
        nets = loop_networks(entry, actor, critic, actor_target, critic_target)
        self.actor, self.critic, self.targets = nets.actor, nets.critic, nets.targets
        continued, updates = (None, 0) if continue_from is None else _continuation(
            c, Path(continue_from))
        device = next(self.critic.parameters()).device
        view = loop_view(entry, nets, action_space, c.gamma, device,
                         lambda: self.session.updates)
        # The diagnostics read the newest rows (an on-policy loop's rollouts are its own)
        rows = KEPT_ROWS if entry.family == ON_POLICY else min(
            c.replay_buffer_size, c.learning_starts + KEPT_ROWS)
        self.buffer = ReplayBuffer(rows, obs_dim, len(view.action_low), device,
                                   seed=derive_seed(c.seed, REPLAY))
        # The gradients each optimiser steps with (a loop may backpropagate the actor's loss
        # through the critic after the critic's step: its .grad then is not its own).
        self.step_gradients = StepGradients({"actor": view.actor, "critic": self.critic})
        # What the loop's own batches hold, against what the env gave (first critics).
        self.sampled = SampledBatches(nets.captured, nets.captured_target, obs_dim,
                                      c.replay_buffer_size, c.num_envs)
        view = dataclasses.replace(view, step_gradients=self.step_gradients.gradients,
                                   step_sources=self.step_gradients.sources.counts,
                                   sampled_batches=self.sampled.state,
                                   stored_dones=lambda: dict(self.sampled.ended_rows))
        # PPO's sampling, DQN's epsilon: no added noise's scale to log
        noise = c.exploration_noise if entry.traits.box_actions else math.nan
        self._saved: dict[str, Any] = {}
        try:
            self.session = Session(c, view, self.buffer, obs_dim, self._save, INTEGRATION,
                                   noise=noise, updates=updates, continued=continued)
        except BaseException:
            self.step_gradients.close()
            self.sampled.close()
            raise

    # ------------------------------------------------------ what the loop calls
    def after_env_step(self, obs: Any, action: Any, reward: Any, next_obs: Any,
                       terminated: Any, truncated: Any, info: Any = None) -> list[Finding]:
        """One env step: arrays of one env, or with a leading num_envs dimension (vector
        envs); a Discrete action is its index, a MultiDiscrete one its indices. `next_obs`:
        the true final observation where an episode ended. `info`
        (optional): the step's info, where the reward's terms are read (a dict, a vector
        env's info dict, or a list of dicts, one per env)."""
        s = self.session
        with self.sampled.suspend():  # its evaluations call the critic: not the loop's batch
            s.step_end()  # the previous step's updates are in: what was due after them
        obs, next_obs = np.asarray(obs, np.float32), np.asarray(next_obs, np.float32)
        batched = obs.ndim == 2
        obs_rows, next_rows = (obs, next_obs) if batched else (obs[None], next_obs[None])
        if len(obs_rows) != self.config.num_envs:  # env steps count every env's step
            raise ConfigError(f"after_env_step got the step of {len(obs_rows)} env(s) but "
                              f"the Watcher's config has num_envs {self.config.num_envs}: "
                              f"set num_envs={len(obs_rows)} in its config")
        action = np.asarray(action, np.float32).reshape(len(obs_rows), -1)
        reward = np.asarray(reward, np.float64).reshape(-1)
        terminated = np.asarray(terminated, bool).reshape(-1)
        truncated = np.asarray(truncated, bool).reshape(-1)
        with self.sampled.suspend():  # DQN's policy calls its Q network: not a batch
            s.sample(obs_rows)
        finite = finite_rows(next_rows, action, reward)  # as rltrain's buffer stores
        self.buffer.add_rows(obs_rows, action, reward, next_rows, terminated, truncated,
                             kept=finite)
        s.steps(obs_rows, action, reward, next_rows, terminated, truncated, finite,
                s.terms.of_envs(info, len(obs_rows)))
        for env in range(len(obs_rows)):
            self.sampled.env_step(obs_rows[env], next_rows[env], bool(terminated[env]),
                                  bool(truncated[env]))
        return s.take()

    def after_update(self, critic_loss: Any = None, actor_loss: Any = None,
                     q_mean: Any = None, batch: Mapping[str, Any] | None = None,
                     **metrics: Any) -> list[Finding]:
        """One update: its losses and mean Q (floats or 0-d tensors; None: not computed
        in this update); the gradient norms are read from the modules. `batch`
        (optional): the batch the update learnt from, as the loop's buffer gave it,
        `{"obs": [B, obs_dim], "dones": [B]}` (tensors or arrays; other keys are not
        read): its rows stored as done are checked against how the env ended them."""
        given = {"critic_loss": critic_loss, "actor_loss": actor_loss, "q_mean": q_mean,
                 **metrics}
        values = {k: float(v.detach()) if isinstance(v, torch.Tensor) else float(v)
                  for k, v in given.items() if v is not None}
        if batch is not None:
            self.sampled.done_rows(batch)
        self.sampled.collect()
        with self.sampled.suspend():  # the diagnostics' own calls of the critic
            self.session.update({**values, **self.step_gradients.norms()})
        self.sampled.arm(self.session.updates)
        return self.session.take()

    def after_eval(self, returns: Sequence[float],
                   lengths: Sequence[int] | None = None) -> list[Finding]:
        """An evaluation the loop ran: its episode returns (and lengths). The Q check
        needs the start states: `evaluate(env)` runs one that has them."""
        empty = np.zeros((0, self.buffer.obs_dim), np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.session.evaluated(EvalResult([float(r) for r in returns],
                                              [int(n) for n in lengths or []], [], empty,
                                              empty, []))
        return self.session.take()

    def evaluate(self, env: gym.Env, episodes: int | None = None) -> list[Finding]:
        """rltrain's evaluation of the deterministic actor on `env` (seeded start states,
        the discounted returns the Q check compares with), recorded and judged."""
        with self.sampled.suspend():
            self.session.evaluated(self.session.evaluate_on(env, episodes))
        return self.session.take()

    # -------------------------------------------------------------- pausing
    @property
    def should_pause(self) -> bool:
        return self.session.pause is not None

    @property
    def pause_is_urgent(self) -> bool:
        """A rule asks for the pause (a NaN reward, an exploding loss): what it found is in
        the latest step, so a loop that trains on rollouts (PPO, A2C) stops before
        training on the one in progress. False without a pause, and for `rltrain pause`,
        which may wait for the end of the rollout and its update."""
        finding = self.session.pause
        return finding is not None and finding.rule != "outside_request"

    @property
    def pause_reason(self) -> str | None:
        finding = self.session.pause
        return None if finding is None else f"[{finding.rule}] {finding.message}"

    def pause(self, **state: Any) -> Path:
        """Save the networks (`actor`, `critic`) and the `state_dict()` of anything passed
        (optimisers, target networks) to `paused_at_step_<N>_state.pt`, with `env_steps`
        and `updates`; record the pause, print the lines that continue the run, close
        it and return that file; load it with `torch.load(path, weights_only=True)`."""
        assert self.should_pause, "pause() without a pause request (see should_pause)"
        self._saved = {name: obj.state_dict() for name, obj in state.items()}
        path = self.session.pause_run(self.continue_with)  # `rltrain status` shows it too
        say(f"paused at step {self.session.env_steps} {self.pause_reason}\n"
            f"{self.continue_with(path)}")
        self.session.close("paused")
        self.step_gradients.close()
        self.sampled.close()
        return path

    def _save(self, paths: RunPaths, kind: str, env_steps: int) -> Path:
        name = "best_model_state.pt" if kind == "best" else f"paused_at_step_{env_steps}_state.pt"
        path = paths.checkpoint_dir / name
        nets = {"actor": self.actor, "critic": self.critic}
        save_tensors(path, {"env_steps": env_steps, "updates": self.session.updates,
                            **{k: net.state_dict() for k, net in nets.items()
                               if net is not None}, **self._saved})
        return path

    def continue_with(self, path: Path) -> str:
        """The file a pause saved, and how the loop continues the run from it."""
        c, s = self.config, self.session
        saved = ", ".join(f'"{k}"' for k in ("actor", "critic", *self._saved)
                          if k != "actor" or self.actor is not None)
        folders = "".join(f', {key}="{value}"' for key, value, default in (
            ("log_dir", c.log_dir, "logs"), ("checkpoint_dir", c.checkpoint_dir,
                                             "checkpoints")) if value != default)
        return (f"  saved: {path}\n"
                f"  once the cause is fixed, load it (torch.load(path, weights_only=True)), "
                f"give {saved} their state_dict, run your loop on from env step "
                f"{s.env_steps} (its \"env_steps\"), and watch it with:\n"
                f"    Watcher(..., run_name=\"{s.paths.name}\"{folders}, "
                f"continue_from=\"{path}\")")

    # -------------------------------------------------------------- the end
    def close(self) -> None:
        """The loop ended: the run is finished (unless it paused)."""
        if not self.session.closed:
            self.session.step_end()
            self.session.close("finished")
        self.step_gradients.close()
        self.sampled.close()

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.session.close("crashed")
            self.step_gradients.close()
            self.sampled.close()


def _defaults(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config's defaults for the loop's algorithm: a loop of PPO, A2C or DQN (their
    runs are another's training) records it in `library`; PPO and A2C have no warm-up."""
    entry = ALGORITHMS.get(str(dict(config or {}).get("algo", "")))
    defaults: dict[str, Any] = {"env_name": "unknown"}
    if entry is not None and not entry.trained:
        defaults["library"] = {"loop": INTEGRATION}
    if entry is not None and entry.family == ON_POLICY:
        defaults["learning_starts"] = 0
    return defaults


def _continuation(config: TrainConfig, path: Path) -> tuple[Continuation, int]:
    """Run `config.run_name` going on from the file its pause saved: where (its env
    steps, episodes, the watch's state) and its updates so far."""
    name = config.run_name
    if name is None:
        raise UserError("continue_from needs the run_name of the run it continues")
    paths = paths_for(config, name)
    if read_status(paths.status_file) is None:
        raise UserError(f"no run '{name}' to continue ({paths.log_dir}); give the run_name "
                        "of the run whose pause saved continue_from")
    check_continuable(paths, INTEGRATION, "continue it with the Watcher")
    saved = load_tensors(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("env_steps"), int):
        raise UserError(f"'{path}' is not a file a Watcher's pause saved (no env_steps)")
    steps = saved["env_steps"]
    return (from_logs(paths, steps, f"a Watcher continued from {path.name}"),
            int(saved.get("updates", 0)))
