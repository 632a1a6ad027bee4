"""The training envs on Ray: N env runners feed one learner (`num_workers`).

`DistributedCollector` has the Collector's interface (utils/training/collector.py): the
run's state (scripts/training/run_state.py) takes one transition at a time from it, so the
replay buffer, `utd_ratio` (updates per env step), the hooks, evaluation and checkpoints
are those of a single-process run. Behind it, `num_workers` Ray actors
(scripts/workers/env_runner.py) each step `num_envs` envs of their own and send
`worker_chunk_steps` vector steps of transitions at a time; the actor's weights go to them
through the object store every `worker_sync_every` updates.

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

Runners lost, failing or silent, and the cluster lost, are
scripts/workers/worker_faults.py's: the run goes on past a runner restarted, or stops as
on an env failure (exit code 5) with a checkpoint. The runners' part of checkpoints is
scripts/workers/worker_checkpoint.py's, their pace (status.json, TensorBoard, the
`worker_starvation` rule) worker_stats.py's.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from typing import Any, Callable

import numpy as np
import torch

from rltrain.scripts.workers.env_runner import EnvRunner
from rltrain.scripts.workers.worker_checkpoint import RunnerCheckpoint
from rltrain.scripts.workers.worker_faults import join_cluster, last_line
from rltrain.scripts.workers.worker_stats import PaceCheck, RunnerMetrics, RunnerStats
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import EnvFailure, UserError
from rltrain.utils.hooks.hook import Hook
from rltrain.utils.training.collector import Collector, Episode, Transition
from rltrain.utils.training.exploration import Exploration
from rltrain.utils.training.normalize import Normalizer

INSTALL_HINT = 'num_workers (--workers) needs Ray: pip install "rltrain[workers]"'

SHUTDOWN_WAIT = 20.0  # seconds Ray's teardown gets once the cluster is lost


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


class DistributedCollector(RunnerCheckpoint):
    """The Collector's interface over `num_workers` Ray env runners."""

    def __init__(self, config: TrainConfig, actor: torch.nn.Module, action_noise: bool) -> None:
        self.ray = _import_ray()
        self.config, self.actor = config, actor
        self.num_runners, self.envs_per_runner = config.num_workers, config.num_envs
        self.num_envs = self.num_runners * self.envs_per_runner  # global env = runner * k + env
        self.normalizer = Normalizer(config.normalize, config.gamma, self.num_envs)  # off
        self.episodes: list[Episode] = []  # the learner's accounting of each env's episode
        self.pending: deque[Transition] = deque()
        self.report = lambda message: None  # events.jsonl, console
        self.cluster_gone = None
        self.owns_ray = not self.ray.is_initialized()
        if self.owns_ray:
            join_cluster(self.ray, config.ray_address, _local_runtime_env(config.ray_address))
        self.connected()  # a Ray Client asks its cluster the first time: now, while it is there
        remote = self.ray.remote(max_restarts=config.worker_max_restarts,
                                 max_task_retries=0)(EnvRunner)
        plain = config_to_dict(config)
        cpu_actor = _cpu_copy(actor)
        spread = remote.options(scheduling_strategy="SPREAD", num_cpus=config.worker_cpus)
        with self.ray_calls():
            self.runners = [spread.remote(plain, i, self.num_runners, cpu_actor, action_noise)
                            for i in range(self.num_runners)]
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
            with self.ray_calls():
                self.ray.get([r.start.remote(first_index) for r in self.runners])
        except self.ray.exceptions.RayActorError as exc:  # its constructor raised
            raise EnvFailure(f"an env runner could not start: {last_line(exc)}",
                             str(exc)) from None
        self.next_index = [first_index + self.envs_per_runner] * self.num_runners
        self.episodes = [Episode(index=first_index + env % self.envs_per_runner,
                                 obs=np.zeros(0, dtype=np.float32))
                         for env in range(self.num_envs)]

    def end(self, env: int, index: int) -> None:
        """The learner's accounting starts episode `index` in `env`; the runner has
        started its next episode there itself, as soon as the last one ended."""
        self.episodes[env] = Episode(index=index, obs=self.episodes[env].obs)

    def start_next(self, env: int) -> None:
        """Nothing to do here: the runner reset its env itself (`end`)."""

    def reseed(self, seed: int) -> None:
        with self.ray_calls():
            self.ray.get([r.reseed.remote(seed) for r in self.runners])

    def close(self) -> None:
        """End the runners (gone already with a lost cluster) and this process' Ray. With
        the cluster lost, Ray's own teardown may wait on a connection that never comes
        back: it gets SHUTDOWN_WAIT seconds in a thread of its own (the run's checkpoint
        is written by then), and Ray's exit hook, which would wait the same, is removed.
        A connection closed is a lost cluster too: a call to Ray then would start a Ray
        of its own (Ray's auto-init) and wait for a cluster that is not there."""
        connected = self.cluster_gone is None and self.connected()
        if connected:
            for runner in self.runners:
                self.ray.kill(runner)
        self.runners = []
        if not self.owns_ray:
            return
        if connected:
            self.ray.shutdown()
            return
        atexit.unregister(self.ray.shutdown)
        ending = threading.Thread(target=self.ray.shutdown, name="ray-shutdown", daemon=True)
        ending.start()
        ending.join(timeout=SHUTDOWN_WAIT)

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
        with self.ray_calls():
            ref = self.ray.put(self.weights)
            for runner in self.runners:
                runner.set_weights.remote(ref)

    def _lockstep_round(self, env_steps: int) -> None:
        """One chunk from every runner, handed out in runner order; a runner's failure
        is dealt with once every other chunk of the round is in."""
        with self.ray_calls():
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
        with self.ray_calls():
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
                with self.ray_calls():
                    ref = self.runners[i].collect.remote(env_steps,
                                                         self.config.worker_chunk_steps)
                self.in_flight[ref] = i

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

    def hooks(self, logger: Any, judge: PaceCheck | None = None) -> list[Hook]:
        """What watches the runners for the run: their figures in TensorBoard, and
        `judge` (the health rules' `check_pace`) told each new reading of the pace."""
        return [RunnerMetrics(self, logger, self.config.log_freq, judge)]


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
