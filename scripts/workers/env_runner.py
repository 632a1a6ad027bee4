"""One env runner: a Collector of its own, acting with a copy of the learner's policy.

`num_workers` runners (scripts/workers/distributed.py makes each a Ray actor) step their
envs while one learner keeps the replay buffer and runs the updates: the actor-learner
shape of Ape-X (Horgan et al. 2018, "Distributed Prioritized Experience Replay", section
3) and D4PG. A runner is today's single-process `Collector` (utils/training/collector.py)
with its own run seed (`derive_seed(seed, WORKERS, index)`, so its episodes' resets are
its own) and its own exploration scale: runner i of N explores with `exploration_noise *
spread ** (2 i / (N - 1) - 1)`, Ape-X's spread of epsilons over actors carried over to
action noise. Its checkpoint state is the Collector's (each episode in progress as its
seed index and actions, replayed on resume), its exploration's, its process's global
random states and its policy's sampling stream: a lockstep run resumes bit for bit.

A runner never raises an env's exception across Ray: `collect` hands it back as data
(`failure`), so the learner reports it with its traceback's last line.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import EnvFailure
from rltrain.utils.run.health import is_finite
from rltrain.utils.seeding import (
    AGENT,
    EXPLORATION,
    WORKERS,
    derive_seed,
    global_rng_state,
    seed_global_generators,
    set_global_rng_state,
)
from rltrain.utils.training.collector import Collector
from rltrain.utils.training.envs import make_env, space_dims
from rltrain.utils.training.exploration import Exploration


def noise_scale(index: int, num_runners: int, spread: float) -> float:
    """Runner `index`'s share of the configured noise: geometric from 1 / spread (runner
    0) to spread (the last runner); one runner explores as configured."""
    if num_runners == 1:
        return 1.0
    return float(spread ** (2 * index / (num_runners - 1) - 1))


def runner_config(config: TrainConfig, index: int, num_runners: int) -> TrainConfig:
    """The config runner `index` steps its envs with: its own seed and noise, no runners."""
    scale = noise_scale(index, num_runners, config.worker_noise_spread)
    final = config.exploration_noise_final
    return dataclasses.replace(
        config, seed=derive_seed(config.seed, WORKERS, index), num_workers=0,
        exploration_noise=config.exploration_noise * scale,
        exploration_noise_final=None if final is None else final * scale)


class EnvRunner:
    """Steps `num_envs` envs with the latest weights it was sent; hands out chunks."""

    def __init__(self, config: dict[str, Any], index: int, num_runners: int,
                 actor: nn.Module, action_noise: bool) -> None:
        torch.set_num_threads(1)  # a runner's policy is one small forward pass per step
        # The config travels as plain data: its dataclasses are generated at import.
        self.config = runner_config(config_from_dict(config), index, num_runners)
        self.index, self.action_noise = index, action_noise
        seed_global_generators(self.config.seed)
        probe = make_env(self.config.env_name, env_kwargs=self.config.env_kwargs)
        _, self.action_dim, low, high = space_dims(probe)
        probe.close()
        self.exploration = Exploration(self.config, low, high,
                                       derive_seed(self.config.seed, EXPLORATION), action_noise)
        self.collector = Collector(self.config, self.exploration)
        self.actor = actor.cpu().eval()
        self.generator = torch.Generator().manual_seed(derive_seed(self.config.seed, AGENT))
        self.next_index = 0  # the index of the next episode this runner starts
        self.node = _node_id()  # the Ray node it runs on (status.json shows it)
        self.last_end: float | None = None  # when its last chunk was done

    def start(self, first_index: int) -> None:
        """Start new episodes (at the run's start, or after the env raised or the process
        was restarted: a failed step's actions are not taken again)."""
        self.collector.unstepped = None
        self.collector.start(first_index)
        self.next_index = first_index + self.collector.num_envs

    def pid(self) -> int:
        """This runner's process id (tests kill it)."""
        return os.getpid()

    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.actor.load_state_dict(weights)

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """The actions to explore with: deterministic where the collector adds noise,
        sampled where the policy explores itself (SAC)."""
        rows = torch.as_tensor(obs, dtype=torch.float32)
        if self.action_noise:
            return self.actor(rows).numpy()
        return self.actor.sample(rows, self.generator)[0].numpy()

    def collect(self, env_steps: int, vector_steps: int) -> dict[str, Any]:
        """`vector_steps` steps of every env, as arrays; `env_steps`: the learner's count,
        which decides warm-up and noise decay. An env that raises ends the chunk early with
        the transitions before it and the `failure` (message, traceback)."""
        if not self.collector.episodes:  # a process Ray restarted: the learner starts it
            return {"runner": self.index, "transitions": {}, "failure": None, "seconds": 0.0,
                    "next_index": self.next_index, "restarted": True}
        started, cpu_started = time.perf_counter(), time.process_time()
        # Waiting for the learner to ask again: it starves this runner when this is long.
        idle = 0.0 if self.last_end is None else started - self.last_end
        rows: list[Any] = []
        failure = None
        try:
            for _ in range(vector_steps * self.collector.num_envs):
                rows.append(self._next(env_steps))
        except EnvFailure as exc:
            failure = (str(exc), exc.details)
        self.last_end = time.perf_counter()
        seconds = self.last_end - started
        return {"runner": self.index, "transitions": _stacked(rows), "failure": failure,
                "seconds": seconds, "next_index": self.next_index, "restarted": False,
                "cpu_seconds": time.process_time() - cpu_started,
                "memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "node": self.node, "idle_seconds": idle}

    def _next(self, env_steps: int) -> tuple[Any, ...]:
        """One transition; an episode that ends with it is followed by the next one (the
        same end as the learner's accounting: scripts/training/run_state.py's
        `count_step`)."""
        t = self.collector.next(env_steps, self.act)
        stored = is_finite(t.next_obs, t.action, t.reward)
        broken = not stored and not np.isfinite(t.next_obs).all()
        if t.terminated or t.truncated or broken:
            self.collector.restart(t.env, self.next_index)
            self.next_index += 1
        return (t.env, t.obs, t.action, t.reward, t.next_obs, t.terminated, t.truncated,
                t.stored_reward)

    def reseed(self, seed: int) -> None:
        """A re-seeded fork: this runner's episodes to come and its noise from `seed`."""
        own = derive_seed(seed, WORKERS, self.index)
        self.collector.reseed(own)
        self.exploration.reseed(derive_seed(own, EXPLORATION))
        self.generator.manual_seed(derive_seed(own, AGENT))

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"collector": self.collector.state_dict(self.action_dim),
                "exploration": self.exploration.state_dict(), "next_index": self.next_index,
                "rng": global_rng_state(), "generator": self.generator.get_state()}

    def restore(self, state: dict[str, Any]) -> list[str] | tuple[str, str]:
        """Rebuild the runner's episodes in progress; returns warnings, or the env's
        failure (message, traceback) if it raised in the replay."""
        self.exploration.load_state_dict(state["exploration"])
        self.next_index = int(state["next_index"])
        set_global_rng_state(state["rng"])
        self.generator.set_state(state["generator"])
        try:
            warnings = self.collector.restore(state["collector"])
            if not self.collector.episodes:  # saved before its envs' first reset
                self.start(self.next_index)
        except EnvFailure as exc:
            return (str(exc), exc.details)
        return warnings


def _node_id() -> str:
    """The Ray node of this process ("" outside a Ray actor)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except (ImportError, RuntimeError, AttributeError):
        return ""


def _stacked(rows: list[tuple[Any, ...]]) -> dict[str, np.ndarray]:
    """Transitions as one array per field: one object to send, not one per step."""
    names = ("env", "obs", "action", "reward", "next_obs", "terminated", "truncated",
             "stored_reward")
    if not rows:
        return {}
    return {name: np.stack([np.asarray(r[i]) for r in rows]) for i, name in enumerate(names)}
