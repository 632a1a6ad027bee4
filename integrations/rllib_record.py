"""What RLlib's env runner sampled, kept for the algorithm's side of rltrain's callback.

RLlib builds its callback class once in the algorithm (which gets `on_algorithm_init`
and `on_train_result`) and once in each env runner (which gets the episodes). With
`num_env_runners=0` both are in one process: the class `rltrain_callback` makes carries
one `Recorder`, which its env runner's instance fills at the end of each `sample()`
(`on_sample_end`: one call per sample, not one per env step) and its algorithm's
instance empties after each training iteration. A remote env runner (another process)
fills its own copy of the class's Recorder; the algorithm's instance takes it there with
RLlib's `foreach_env_runner` (`take_recorded`), which sends back that runner's chunks.
Besides the steps, a chunk keeps the log-probability the sampling policy gave each
action (PPO's, for its step size), and the Recorder the epsilon its env runner's module
last explored with (DQN's: RLlib reports none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

LOGP = "action_logp"  # ray.rllib.core.columns.Columns.ACTION_LOGP


class Chunk(NamedTuple):
    """Consecutive env steps of one episode: `obs` holds one row more than the steps
    (the observation after the last); only the last step may end the episode."""

    obs: np.ndarray  # [T + 1, obs_dim]
    actions: np.ndarray  # [T, action_dim], as the module computed them
    rewards: np.ndarray  # [T]
    terminated: bool
    truncated: bool
    logp: np.ndarray | None = None  # [T], log pi(action) of the sampling policy, if kept


@dataclass
class Recorder:
    """The training chunks and the evaluation episodes sampled in this process since
    the algorithm's callback last took them."""

    chunks: list[Chunk] = field(default_factory=list)
    evaluations: list[tuple[float, int]] = field(default_factory=list)  # return, length
    epsilon: float | None = None  # the training module's latest (None: not epsilon-greedy)

    def sampled(self, env_runner: Any, episodes: list[Any]) -> None:
        """`on_sample_end`'s episodes (SingleAgentEpisode chunks)."""
        evaluating = bool(getattr(env_runner.config, "in_evaluation", False))
        if not evaluating:
            self.epsilon = exploration_rate(env_runner)
        for episode in episodes:
            if len(episode) == 0:
                continue
            if evaluating:
                if episode.is_done:
                    self.evaluations.append((float(episode.get_return()), len(episode)))
                continue
            self.chunks.append(Chunk(
                np.asarray(episode.get_observations(), np.float32),
                np.asarray(episode.get_actions(), np.float32),
                np.asarray(episode.get_rewards(), np.float64),
                bool(episode.is_terminated), bool(episode.is_truncated), _logp(episode)))

    def take_chunks(self) -> list[Chunk]:
        chunks, self.chunks = self.chunks, []
        return chunks

    def take_evaluations(self) -> list[tuple[float, int]]:
        found, self.evaluations = self.evaluations, []
        return found


def _logp(episode: Any) -> np.ndarray | None:
    """The log-probabilities the episode's module gave its actions (None: it kept none,
    as DQN's epsilon-greedy module)."""
    try:
        return np.asarray(episode.get_extra_model_outputs(LOGP), np.float32)
    except KeyError:
        return None


def exploration_rate(env_runner: Any) -> float | None:
    """The epsilon the env runner's module explores with now (DQN's `epsilon_schedule`,
    stepped by RLlib as the runner samples); None for a module without one."""
    schedule = getattr(getattr(env_runner, "module", None), "epsilon_schedule", None)
    return None if schedule is None else float(schedule.get_current_value())


def take_recorded(env_runner: Any, base: type) -> tuple[int, list[Chunk], float | None]:
    """In an env runner's process: its index, the training chunks the Recorder of its
    callback class (a subclass of `base`) kept, taken, and its module's epsilon."""
    classes = env_runner.config.callbacks_class
    classes = classes if isinstance(classes, (list, tuple)) else [classes]
    recorders = [cls.recorder for cls in classes if isinstance(cls, type)
                 and issubclass(cls, base)]
    chunks = [chunk for recorder in recorders for chunk in recorder.take_chunks()]
    epsilon = next((r.epsilon for r in recorders if r.epsilon is not None), None)
    return int(env_runner.worker_index or 0), chunks, epsilon
