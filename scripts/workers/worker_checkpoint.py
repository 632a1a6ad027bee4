"""The env runners' part of a run's checkpoint (scripts/workers/distributed.py's collector).

A checkpoint holds the learner's episodes and the transitions not handed out, the
weights the runners act with, each runner's next episode index and restarts, and each
runner's own state (scripts/workers/env_runner.py: its episodes in progress as seeds and
actions, its exploration and random streams), so a lockstep run resumes bit for bit.
A runner whose state could not be had (lost, or the whole cluster lost:
scripts/workers/worker_faults.py) is saved as None and starts new episodes on resume; a
checkpoint of another number of runners, or of none, resumes with new episodes too
(correct, not bit for bit).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from rltrain.scripts.workers.worker_faults import ClusterLost, RunnerFaults
from rltrain.utils.errors import EnvFailure
from rltrain.utils.training.collector import Episode, pending_from_state, shared_state


class RunnerCheckpoint(RunnerFaults):
    """`state_dict` and `restore` of `DistributedCollector` (its attributes, see its
    `__init__`)."""

    num_runners: int
    synced_updates: int
    _add: Callable[[int, dict[str, Any]], None]  # a chunk's transitions to be handed out
    _send_weights: Callable[[], None]  # the weights to every runner

    def state_dict(self, action_dim: int) -> dict[str, Any]:
        """The learner's episodes and transitions not handed out, the weights the runners
        act with, and every runner's own state (None for one that cannot say, and for
        every one once the cluster is lost: their episodes start anew on resume)."""
        runners = self._runner_states()
        return {**shared_state(self.episodes, self.pending, action_dim),
                "unstepped": None, "reseeded": None,
                "workers": {"mode": self.config.worker_mode, "runners": runners,
                            "weights": self.weights, "synced_updates": self.synced_updates,
                            "next_index": list(self.next_index),
                            "restarts": list(self.restarts)}}

    def _runner_states(self) -> list[dict[str, Any] | None]:
        try:
            self._take_in_flight()
        except ClusterLost:  # now or before: no runner's state can be known
            self.in_flight = {}
            return [None] * self.num_runners
        runners = []
        for runner in self.runners:
            try:
                with self.ray_calls():
                    runners.append(self.ray.get(runner.state_dict.remote(),
                                                timeout=self.config.worker_timeout))
            except (self.ray.exceptions.RayError, ClusterLost):  # lost or timed out
                runners.append(None)
        return runners

    def _take_in_flight(self) -> None:
        """Async: the chunks in flight, taken before a checkpoint."""
        self.check_cluster()
        for ref, i in list(self.in_flight.items()):
            del self.in_flight[ref]
            chunk = self._get(i, ref)
            if chunk is not None:
                self._add(i, chunk)

    def restore(self, state: dict[str, Any]) -> list[str]:
        """Each runner's state from a checkpoint of as many runners; from any other
        checkpoint the runners start new episodes (correct, not bit for bit)."""
        saved = state.get("workers")
        if saved is None or len(saved["runners"]) != self.num_runners:
            before = f"{len(saved['runners'])} env runners" if saved else "a single process"
            self.episodes, self.pending = [], deque()
            return [f"the checkpoint was written by {before} and this run has "
                    f"{self.num_runners}: the episodes in progress start anew and the "
                    "transitions not handed out are dropped, so this resume is not bit-exact"]
        self.weights, self.synced_updates = saved["weights"], int(saved["synced_updates"])
        self.next_index = [int(i) for i in saved["next_index"]]
        self.restarts = [int(i) for i in saved["restarts"]]
        self.stats.restarts = list(self.restarts)
        self.episodes = [Episode(index=int(e["index"]), obs=e["obs"].numpy(),
                                 episode_return=float(e["episode_return"]),
                                 length=int(e["length"]),
                                 non_finite_rewards=int(e.get("non_finite_rewards", 0)))
                         for e in state["episodes"]]
        self.pending = pending_from_state(state)
        if self.weights is not None:
            self._send_weights()
        return self._restore_runners(saved["runners"])

    def _restore_runners(self, states: list[dict[str, Any] | None]) -> list[str]:
        with self.ray_calls():
            refs = [None if s is None else r.restore.remote(s)
                    for r, s in zip(self.runners, states, strict=True)]
        warnings = []
        for i, ref in enumerate(refs):
            with self.ray_calls():
                result = ["its state was not saved"] if ref is None else self.ray.get(ref)
            if isinstance(result, tuple):  # the env raised in the replay
                raise EnvFailure(f"env runner {i}: {result[0]}", result[1])
            if ref is None or result:
                warnings += [f"env runner {i}: {w}" for w in result]
            if ref is None:
                self._fresh_episodes(i)
        return warnings

    def _fresh_episodes(self, runner: int) -> None:
        with self.ray_calls():
            self.ray.get(self.runners[runner].start.remote(self.next_index[runner]))
        self.episodes_anew(runner)
