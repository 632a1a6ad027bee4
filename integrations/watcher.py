"""Watcher: rltrain's health rules and diagnostics for a training loop of your own.

A CleanRL-style loop calls it at the points every off-policy loop has: after an env step
(`after_env_step`), after an update (`after_update`), after an evaluation (`after_eval`,
or `evaluate(env)`, which runs rltrain's own). Each call returns the findings it made;
`should_pause` says a rule (or `rltrain pause RUN` from another terminal) asks the loop
to stop, and `pause()` then saves the networks and records why. Gradients are read as
each optimiser steps with them (integrations/views.py `StepGradients`). The actor must
map observations to actions in the env's units, the critic (or each of several) map
(observation, action) to Q [B, 1]; see docs/integrations.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rltrain.integrations.sampled_batches import SampledBatches
from rltrain.integrations.session import Session, session_config
from rltrain.integrations.views import Critics, StepGradients, ddpg_probe, deterministic_act
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.io.checkpoint import save_tensors
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.health import is_finite
from rltrain.utils.run.progress import say
from rltrain.utils.seeding import REPLAY, derive_seed
from rltrain.utils.training.replay_buffer import ReplayBuffer

# The diagnostics read the newest rows of a buffer (up to the warm-up plus a few
# thousand): the Watcher keeps that many itself, not the loop's whole buffer.
KEPT_ROWS = 10_000


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

    def __init__(self, actor: nn.Module, critic: nn.Module | Sequence[nn.Module],
                 observation_space: gym.Space, action_space: gym.Space,
                 run_name: str | None = None, log_dir: str = "logs",
                 checkpoint_dir: str = "checkpoints",
                 config: Mapping[str, Any] | None = None,
                 actor_target: nn.Module | None = None,
                 critic_target: nn.Module | Sequence[nn.Module] | None = None) -> None:
        """`config`: rltrain config keys; those of the loop itself (gamma, batch_size,
        learning_starts, replay_buffer_size, max_timesteps, num_envs, seed, env_name,
        tau) make the checks fit it; the rest set rule thresholds and actions.
        `actor_target`, `critic_target`: the loop's target networks (the critic's as
        many as the critic's), for the target_update rule, which judges how the critic's
        target follows the critic (none given: not judged)."""
        obs_dim, action_dim = box_dims(observation_space, action_space)
        self.actor = actor
        self.critic = critic if isinstance(critic, nn.Module) else Critics(list(critic))
        targets = {"actor_target": actor_target, "critic_target": critic_target
                   if critic_target is None or isinstance(critic_target, nn.Module)
                   else Critics(list(critic_target))}
        self.targets = {name: net for name, net in targets.items() if net is not None}
        # The gradients each optimiser steps with (a loop may backpropagate the actor's loss
        # through the critic after the critic's step: its .grad then is not its own).
        self.step_gradients = StepGradients({"actor": actor, "critic": self.critic})
        first = critic if isinstance(critic, nn.Module) else critic[0]
        first_target = (critic_target if critic_target is None
                        or isinstance(critic_target, nn.Module) else critic_target[0])
        self.config = session_config({"env_name": "unknown", **dict(config or {})}, {
            "run_name": run_name, "log_dir": log_dir, "checkpoint_dir": checkpoint_dir})
        device = next(actor.parameters()).device
        c = self.config
        self.buffer = ReplayBuffer(min(c.replay_buffer_size, c.learning_starts + KEPT_ROWS),
                                   obs_dim, action_dim, device,
                                   seed=derive_seed(c.seed, REPLAY))
        # What the loop's own batches hold, against what the env gave (first critics).
        self.sampled = SampledBatches(first, first_target, obs_dim, c.replay_buffer_size)
        view = AgentView(
            actor=actor, critic=self.critic, q_value=lambda o, a: first(o, a)[..., :1],
            act=deterministic_act(actor, device),
            probe=ddpg_probe(actor, self.critic, lambda o, a: first(o, a)[..., :1], c.gamma),
            updates=lambda: self.session.updates,
            networks=lambda: {"actor": self.actor, "critic": self.critic, **self.targets},
            action_low=np.asarray(action_space.low, np.float32),
            action_high=np.asarray(action_space.high, np.float32), device=device,
            step_gradients=self.step_gradients.gradients,
            step_sources=self.step_gradients.sources.counts,
            sampled_batches=self.sampled.state)
        self.session = Session(c, view, self.buffer, obs_dim, self._save,
                               "plain PyTorch loop (rltrain.integrations.Watcher)",
                               noise=c.exploration_noise)
        self._saved: dict[str, Any] = {}

    # ------------------------------------------------------ what the loop calls
    def after_env_step(self, obs: Any, action: Any, reward: Any, next_obs: Any,
                       terminated: Any, truncated: Any, info: Any = None) -> list[Finding]:
        """One env step: arrays of one env, or with a leading num_envs dimension (vector
        envs). `next_obs`: the true final observation where an episode ended. `info`
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
        s.sample(obs_rows)
        terms = s.terms.of_envs(info, len(obs_rows))
        for env in range(len(obs_rows)):
            if is_finite(next_rows[env], action[env], float(reward[env])):  # as rltrain stores
                self.buffer.add(obs_rows[env], action[env], float(reward[env]),
                                next_rows[env], bool(terminated[env]), bool(truncated[env]))
            s.step(env, obs_rows[env], action[env], float(reward[env]), next_rows[env],
                   bool(terminated[env]), bool(truncated[env]), terms[env])
            self.sampled.env_step(obs_rows[env], next_rows[env])
        return s.take()

    def after_update(self, critic_loss: Any = None, actor_loss: Any = None,
                     q_mean: Any = None, **metrics: Any) -> list[Finding]:
        """One update: its losses and mean Q (floats or 0-d tensors; None: not computed
        in this update); the gradient norms are read from the modules."""
        given = {"critic_loss": critic_loss, "actor_loss": actor_loss, "q_mean": q_mean,
                 **metrics}
        values = {k: float(v.detach()) if isinstance(v, torch.Tensor) else float(v)
                  for k, v in given.items() if v is not None}
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
    def pause_reason(self) -> str | None:
        finding = self.session.pause
        return None if finding is None else f"[{finding.rule}] {finding.message}"

    def pause(self, **state: Any) -> Path:
        """Save the actor, the critic and the `state_dict()` of anything passed (optimisers,
        target networks) to `paused_at_step_<N>_state.pt`, record the pause, close the run
        and return that file; load it with `torch.load(path, weights_only=True)`."""
        assert self.should_pause, "pause() without a pause request (see should_pause)"
        self._saved = {name: obj.state_dict() for name, obj in state.items()}
        path = self.session.pause_run(continue_with)  # what `rltrain status` shows too
        say(f"paused at step {self.session.env_steps} {self.pause_reason}\n"
            f"{continue_with(path)}")
        self.session.close("paused")
        self.step_gradients.close()
        self.sampled.close()
        return path

    def _save(self, paths: RunPaths, kind: str, env_steps: int) -> Path:
        name = "best_model_state.pt" if kind == "best" else f"paused_at_step_{env_steps}_state.pt"
        path = paths.checkpoint_dir / name
        save_tensors(path, {"env_steps": env_steps, "actor": self.actor.state_dict(),
                            "critic": self.critic.state_dict(), **self._saved})
        return path

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


def continue_with(path: Path) -> str:
    """How a plain loop's paused run goes on: `rltrain resume` cannot run the loop."""
    return (f"  saved: {path}; to continue, load it (torch.load(path, weights_only=True)), "
            "fix the cause, and run your loop on with a new run_name")
