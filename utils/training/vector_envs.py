"""The training envs: `num_envs` copies of the env (utils/training/envs.py's `make_env`,
each `Replayable`) behind Gymnasium's vector API, stepped in this process (`sync`) or in
a process each (`async`), and what an async worker does when its env fails.
"""

from __future__ import annotations

import functools
import signal
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from rltrain.utils.errors import EnvFailure
from rltrain.utils.training.envs import Replayable, make_env


def _sub_env(env_name: str, index: int, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    return Replayable(make_env(env_name, env_kwargs=env_kwargs), index, env_name)


def _worker_sub_env(env_name: str, index: int,
                    env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """In an async worker process: Ctrl-C belongs to the trainer, which pauses the run
    and closes the workers; a worker that died of the same SIGINT would lose the step.
    An env whose constructor raises there is a `_FailedEnv`: Gymnasium's worker would die
    of the exception, and the trainer read a closed pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return _sub_env(env_name, index, env_kwargs)
    except EnvFailure as exc:
        return Replayable(_FailedEnv(exc), index, env_name)


class _FailedEnv(gym.Env):
    """Stands in for an env whose constructor raised in an async worker. Gymnasium's
    worker first compares its env's spaces with those of the env made in the trainer's
    process; comparing these raises the failure, which the worker hands back to the
    trainer as it does a step's exception (reset and step raise it too)."""

    def __init__(self, failure: EnvFailure) -> None:
        self.failure = failure
        self.observation_space = self.action_space = _FailedSpace(failure)

    def reset(self, **kwargs: Any) -> Any:
        raise self.failure

    def step(self, action: Any) -> Any:
        raise self.failure


class _FailedSpace(gym.spaces.Box):
    """A space whose comparison raises `failure` (as a subclass of Box, Python asks its
    `__eq__` first when a Box is compared with it)."""

    def __init__(self, failure: EnvFailure) -> None:
        super().__init__(-1.0, 1.0, (1,), np.float32)
        self.failure = failure

    def __eq__(self, other: object) -> bool:
        raise self.failure

    __hash__ = gym.spaces.Box.__hash__


def _quiet_worker_errors() -> None:
    """An env's exception in an async worker comes back to the trainer, which reports it in
    one line and writes its traceback to the log folder; Gymnasium also logs it, as some
    twenty lines of warnings on the console, which these filters leave out."""
    for message in ("Received the following error from Worker",
                    r"Traceback \(most recent call last\)",
                    "Raising the last exception back to the main process"):
        warnings.filterwarnings("ignore", message=rf".*ERROR: {message}")


def make_training_envs(env_name: str, num_envs: int, mode: str,
                       env_kwargs: dict[str, Any] | None = None) -> gym.vector.VectorEnv:
    """`num_envs` copies of the env behind Gymnasium's vector API, without autoreset (the
    trainer resets each finished episode itself, with that episode's seed). `sync` steps
    them in turn in this process; `async` in one process each, which pays when a step
    is expensive (physics simulators), not for a cheap step like Pendulum's."""
    if mode == "async":
        _quiet_worker_errors()
        # spawn: a forked copy of a process that already runs torch's threads can hang.
        return gym.vector.AsyncVectorEnv(
            [functools.partial(_worker_sub_env, env_name, i, env_kwargs) for i in range(num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.DISABLED, context="spawn")
    return gym.vector.SyncVectorEnv(
        [functools.partial(_sub_env, env_name, i, env_kwargs) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.DISABLED)
