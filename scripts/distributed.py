"""The training envs on Ray: N env runners feed one learner (`num_workers`).

`DistributedCollector` has the Collector's interface (scripts/collector.py): the run's
state (scripts/run_state.py) takes one transition at a time from it, so the replay
buffer, `utd_ratio` (updates per env step), the hooks, evaluation and checkpoints are
those of a single-process run. Behind it, `num_workers` Ray actors (scripts/env_runner.py)
each step `num_envs` envs of their own and send `worker_chunk_steps` vector steps of
transitions at a time; the actor's weights go to them through the object store every
`worker_sync_every` updates.

- **lockstep**: every runner is asked for one chunk, and the chunks are handed out in
  runner order. The runners step in parallel, but what the learner sees depends only on
  the run's state: a run is reproducible, and its checkpoint (each runner's state plus
  the transitions not handed out and the weights the runners act with) resumes bit for
  bit.
- **async**: each runner has one chunk in flight; the learner takes whichever is ready
  first and asks that runner for its next at once, so runners step while the learner
  updates. The queue is bounded (one chunk waiting and one in flight per runner), so
  runners wait when the learner falls behind and the replay ratio stays as configured.
  A checkpoint first takes the chunks in flight; a resumed async run continues
  correctly, not bit for bit.

Either way the learner waits at most `worker_timeout` seconds for a chunk, then stops the
run with a checkpoint naming the runner. A runner whose process dies is restarted by
Ray (`max_restarts`); one whose env raises is started again by the learner; both are
events in events.jsonl, and the runner's episodes in progress start anew (their
transitions not handed out are dropped, so none is counted twice). After
`worker_max_restarts` the run stops as on an env failure (exit code 5), with a
checkpoint.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any, Callable

import numpy as np
import torch

from rltrain.scripts.collector import (
    Collector,
    Episode,
    Transition,
    pending_from_state,
    shared_state,
)
from rltrain.scripts.env_runner import EnvRunner
from rltrain.scripts.worker_stats import RunnerMetrics, RunnerStats
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import EnvFailure, UserError
from rltrain.utils.hooks.hook import Hook
from rltrain.utils.training.exploration import Exploration
from rltrain.utils.training.normalize import Normalizer

INSTALL_HINT = 'num_workers (--workers) needs Ray: pip install "rltrain[workers]"'


def make_collector(config: TrainConfig, exploration: Exploration, actor: torch.nn.Module,
                   action_noise: bool) -> Collector | DistributedCollector:
    """The run's training envs: in this process, or on `num_workers` Ray env runners."""
    if config.num_workers == 0:
        return Collector(config, exploration)
    return DistributedCollector(config, actor, action_noise)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return ray


class DistributedCollector:
    """The Collector's interface over `num_workers` Ray env runners."""

    def __init__(self, config: TrainConfig, actor: torch.nn.Module, action_noise: bool) -> None:
        self.ray = _import_ray()
        self.config, self.actor = config, actor
        self.num_runners, self.envs_per_runner = config.num_workers, config.num_envs
        self.num_envs = self.num_runners * self.envs_per_runner  # global env = runner * k + env
        self.normalizer = Normalizer(config.normalize, config.gamma, self.num_envs)  # off
        self.episodes: list[Episode] = []  # the learner's accounting of each env's episode
        self.pending: deque[Transition] = deque()
        self.report: Callable[[str], None] = lambda message: None  # events.jsonl, console
        self.owns_ray = not self.ray.is_initialized()
        if self.owns_ray:
            self.ray.init(address=config.ray_address, include_dashboard=False,
                          log_to_driver=False, configure_logging=False,
                          runtime_env=_local_runtime_env(config.ray_address))
        remote = self.ray.remote(max_restarts=config.worker_max_restarts,
                                 max_task_retries=0)(EnvRunner)
        plain = config_to_dict(config)
        cpu_actor = _cpu_copy(actor)
        spread = remote.options(scheduling_strategy="SPREAD", num_cpus=config.worker_cpus)
        self.runners = [spread.remote(
            plain, i, self.num_runners, cpu_actor, action_noise) for i in range(self.num_runners)]
        self.weights: dict[str, torch.Tensor] | None = None  # what the runners act with
        self.synced_updates = 0  # the learner's updates when they were sent
        self.updates: Callable[[], int] = lambda: 0  # the learner's update count (RunState)
        self.next_index = [0] * self.num_runners  # each runner's next episode index
        self.restarts = [0] * self.num_runners
        self.in_flight: dict[Any, int] = {}  # async: chunk -> runner
        self.stats = RunnerStats(self.num_runners)

    # ------------------------------------------------------------ episodes
    def start(self, first_index: int) -> None:
        try:
            self.ray.get([r.start.remote(first_index) for r in self.runners])
        except self.ray.exceptions.RayActorError as exc:  # its constructor raised
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            raise EnvFailure(f"an env runner could not start: {lines[-1]}", str(exc)) from None
        self.next_index = [first_index + self.envs_per_runner] * self.num_runners
        self.episodes = [Episode(index=first_index + env % self.envs_per_runner,
                                 obs=np.zeros(0, dtype=np.float32))
                         for env in range(self.num_envs)]

    def restart(self, env: int, index: int) -> None:
        """The learner's accounting starts episode `index` in `env`; the runner has
        started its next episode there itself, as soon as the last one ended."""
        self.episodes[env] = Episode(index=index, obs=self.episodes[env].obs)

    def reseed(self, seed: int) -> None:
        self.ray.get([r.reseed.remote(seed) for r in self.runners])

    def close(self) -> None:
        for runner in self.runners:
            self.ray.kill(runner)
        self.runners = []
        if self.owns_ray:
            self.ray.shutdown()

    # --------------------------------------------------------- transitions
    def next(self, env_steps: int, policy: Callable[[np.ndarray], np.ndarray]) -> Transition:
        """The next transition; asks the runners for chunks when none is waiting. The
        runners act with their own copy of the actor (`policy` is the learner's)."""
        while not self.pending:
            self._broadcast_if_due()
            waiting = time.perf_counter()  # runners starve the learner when this is long
            if self.config.worker_mode == "lockstep":
                self._lockstep_round(env_steps)
            else:
                self._async_chunk(env_steps)
            self.stats.learner_wait += time.perf_counter() - waiting
        t = self.pending.popleft()
        self.episodes[t.env].obs = t.next_obs
        return t

    def _broadcast_if_due(self) -> None:
        """Send the actor's weights every `worker_sync_every` updates (and at the start),
        once through the object store for all runners."""
        updates = self.updates()
        due = updates - self.synced_updates >= self.config.worker_sync_every
        if self.weights is not None and not due:
            return
        self.weights = {k: v.detach().cpu().clone() for k, v in self.actor.state_dict().items()}
        self.synced_updates = updates
        self._send_weights()

    def _send_weights(self) -> None:
        ref = self.ray.put(self.weights)
        for runner in self.runners:
            runner.set_weights.remote(ref)

    def _lockstep_round(self, env_steps: int) -> None:
        """One chunk from every runner, handed out in runner order; a runner's failure
        is dealt with once every other chunk of the round is in."""
        refs = [r.collect.remote(env_steps, self.config.worker_chunk_steps)
                for r in self.runners]
        chunks = [self._get(i, ref) for i, ref in enumerate(refs)]
        for i, chunk in enumerate(chunks):
            if chunk is not None:
                self._add(i, chunk)
        for i, chunk in enumerate(chunks):
            self._check(i, chunk)

    def _async_chunk(self, env_steps: int) -> None:
        """The first chunk any runner has ready; that runner is asked for its next at
        once, so it steps while the learner takes this one (a runner has at most one
        chunk waiting and one in flight: runners wait when the learner falls behind)."""
        self._launch_idle(env_steps)
        ready, _ = self.ray.wait(list(self.in_flight), num_returns=1,
                                 timeout=self.config.worker_timeout)
        if not ready:
            self._timed_out(sorted(self.in_flight.values()))
        i = self.in_flight.pop(ready[0])
        chunk = self._get(i, ready[0])
        if chunk is not None:
            self._add(i, chunk)
        self._check(i, chunk)
        # The env steps the learner will have counted when it reaches the next chunk.
        self._launch_idle(env_steps + len(self.pending))

    def _launch_idle(self, env_steps: int) -> None:
        """Ask every runner without a chunk in flight for one."""
        for i in range(self.num_runners):
            if i not in self.in_flight.values():
                ref = self.runners[i].collect.remote(env_steps, self.config.worker_chunk_steps)
                self.in_flight[ref] = i

    def _check(self, runner: int, chunk: dict[str, Any] | None) -> None:
        """A runner lost (its process died, or Ray restarted it since its last chunk) or
        failed (its env raised) is started again, or the run stops."""
        if chunk is None:
            self._runner_lost(runner, "its process died while it collected")
        elif chunk["restarted"]:
            self._runner_lost(runner, "its process died and Ray restarted it")
        elif chunk["failure"] is not None:
            self._runner_failed(runner, *chunk["failure"])

    def _get(self, runner: int, ref: Any) -> dict[str, Any] | None:
        """A runner's chunk; None if its process died while it collected."""
        try:
            return self.ray.get(ref, timeout=self.config.worker_timeout)
        except self.ray.exceptions.GetTimeoutError:
            self._timed_out([runner])
        except self.ray.exceptions.RayActorError:
            return None
        except self.ray.exceptions.RayError as exc:  # the cluster itself (its head) is gone
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            raise EnvFailure(f"the Ray cluster was lost: {lines[-1] if lines else exc}",
                             str(exc)) from None

    def _timed_out(self, runners: list[int]) -> None:
        names = ", ".join(str(i) for i in runners)
        problem = (f"env runner{'s' if len(runners) > 1 else ''} {names} sent no transitions "
                   f"in {self.config.worker_timeout:g} s (worker_timeout)")
        raise EnvFailure(problem, problem + "\n")

    def _add(self, runner: int, chunk: dict[str, Any]) -> None:
        """A chunk's transitions, each under its global env index, to be handed out."""
        self.next_index[runner] = int(chunk["next_index"])
        columns = chunk["transitions"]
        self.stats.record(runner, len(columns.get("env", ())), chunk)
        if not columns:
            return
        first = runner * self.envs_per_runner
        for row in range(len(columns["env"])):
            self.pending.append(Transition(
                first + int(columns["env"][row]), columns["obs"][row], columns["action"][row],
                float(columns["reward"][row]), columns["next_obs"][row],
                bool(columns["terminated"][row]), bool(columns["truncated"][row]),
                float(columns["stored_reward"][row])))

    # -------------------------------------------------------------- faults
    def _runner_lost(self, runner: int, why: str) -> None:
        self._restart_runner(runner, f"env runner {runner} was lost ({why})", why)

    def _runner_failed(self, runner: int, message: str, details: str) -> None:
        self._restart_runner(runner, f"env runner {runner}: {message}", details)

    def _restart_runner(self, runner: int, problem: str, details: str) -> None:
        """Start the runner's episodes anew (Ray has restarted a dead process already), or
        stop the run once its restarts are used up. Its transitions not handed out yet are
        dropped with its episodes in progress: none is counted twice."""
        self.restarts[runner] += 1
        self.stats.restarts[runner] = self.restarts[runner]
        if self.restarts[runner] > self.config.worker_max_restarts:
            raise EnvFailure(f"{problem}; its {self.config.worker_max_restarts} restarts "
                             "(worker_max_restarts) are used up", details)
        self.report(f"{problem}; restarted ({self.restarts[runner]} of "
                    f"{self.config.worker_max_restarts}), its episodes in progress start anew")
        envs = range(runner * self.envs_per_runner, (runner + 1) * self.envs_per_runner)
        self.pending = deque(t for t in self.pending if t.env not in envs)
        self.in_flight = {ref: i for ref, i in self.in_flight.items() if i != runner}
        first = self.next_index[runner]
        if not self._call_restarted(runner, "start", first):
            raise EnvFailure(f"{problem}; Ray could not restart it within "
                             f"{self.config.worker_timeout:g} s (worker_timeout)", details)
        self.next_index[runner] = first + self.envs_per_runner
        if self.weights is not None:
            self.runners[runner].set_weights.remote(self.ray.put(self.weights))
        for env in envs:
            self.episodes[env] = Episode(index=first + env % self.envs_per_runner,
                                         obs=self.episodes[env].obs)

    def _call_restarted(self, runner: int, method: str, *args: Any) -> bool:
        """Call `method` of a runner whose process Ray may still be restarting: calls fail
        until it is back, so they are tried again until `worker_timeout`."""
        deadline = time.monotonic() + self.config.worker_timeout
        while True:
            try:
                ref = getattr(self.runners[runner], method).remote(*args)
                self.ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
                return True
            except self.ray.exceptions.GetTimeoutError:
                return False
            except self.ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)

    # ----------------------------------------------------------------- status
    def status(self) -> dict[str, Any]:
        """Each runner's env steps per second, the learner's updates per second and the
        transitions and chunks waiting for it, as status.json shows them."""
        return {"workers": {"mode": self.config.worker_mode,
                            "queue_transitions": len(self.pending),
                            "chunks_in_flight": len(self.in_flight),
                            **self.stats.summary(self.updates())}}

    def scalars(self) -> dict[str, float]:
        """The status' figures as TensorBoard scalars."""
        stats = self.stats
        values = {"workers/learner_updates_per_s": stats.learner_rate(self.updates()),
                  "workers/learner_waiting_percent": stats.learner_wait_percent,
                  "workers/queue_transitions": float(len(self.pending))}
        for i in range(self.num_runners):
            values[f"workers/runner_{i}_env_steps_per_s"] = stats.steps_per_s[i]
            values[f"workers/runner_{i}_cpu_percent"] = stats.cpu_percent[i]
            values[f"workers/runner_{i}_memory_mb"] = stats.memory_mb[i]
            values[f"workers/runner_{i}_idle_percent"] = stats.idle_percent[i]
        return values

    def hooks(self, logger: Any) -> list[Hook]:
        """What watches the runners for the run: their figures in TensorBoard."""
        return [RunnerMetrics(self, logger, self.config.log_freq)]

    # ------------------------------------------------------------------ state
    def state_dict(self, action_dim: int) -> dict[str, Any]:
        """The learner's episodes and transitions not handed out, the weights the runners
        act with, and every runner's own state (None for one that cannot say)."""
        for ref, i in list(self.in_flight.items()):  # async: take what is in flight first
            del self.in_flight[ref]
            chunk = self._get(i, ref)
            if chunk is not None:
                self._add(i, chunk)
        runners = []
        for runner in self.runners:
            try:
                runners.append(self.ray.get(runner.state_dict.remote(),
                                            timeout=self.config.worker_timeout))
            except self.ray.exceptions.RayError:  # lost, timed out, or the cluster gone
                runners.append(None)
        return {**shared_state(self.episodes, self.pending, action_dim),
                "unstepped": None, "reseeded": None,
                "workers": {"mode": self.config.worker_mode, "runners": runners,
                            "weights": self.weights, "synced_updates": self.synced_updates,
                            "next_index": list(self.next_index),
                            "restarts": list(self.restarts)}}

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
        refs = [None if s is None else r.restore.remote(s)
                for r, s in zip(self.runners, states, strict=True)]
        warnings = []
        for i, ref in enumerate(refs):
            result = ["its state was not saved"] if ref is None else self.ray.get(ref)
            if isinstance(result, tuple):  # the env raised in the replay
                raise EnvFailure(f"env runner {i}: {result[0]}", result[1])
            if ref is None or result:
                warnings += [f"env runner {i}: {w}" for w in result]
            if ref is None:
                self._fresh_episodes(i)
        return warnings

    def _fresh_episodes(self, runner: int) -> None:
        first = self.next_index[runner]
        self.ray.get(self.runners[runner].start.remote(first))
        self.next_index[runner] = first + self.envs_per_runner
        envs = range(runner * self.envs_per_runner, (runner + 1) * self.envs_per_runner)
        self.pending = deque(t for t in self.pending if t.env not in envs)


def _local_runtime_env(address: str | None) -> dict[str, Any] | None:
    """A local Ray's runners import what this process imports from its folder and its
    PYTHONPATH (a user's own env module, `some.module:EnvName-v0`); on a cluster, the
    nodes need rltrain and the env's package installed."""
    if address is not None:
        return None
    path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


def _cpu_copy(actor: torch.nn.Module) -> torch.nn.Module:
    """The actor as the runners get it once at their start: on the CPU, no gradients."""
    import copy

    clone = copy.deepcopy(actor).cpu()
    clone.requires_grad_(False)
    return clone
