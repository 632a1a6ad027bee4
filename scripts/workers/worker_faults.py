"""What goes wrong with env runners on Ray (scripts/workers/distributed.py), and what the
run does.

- **A runner lost**: its process died (Ray restarts it, `max_restarts`) or its env raised
  (the learner starts its episodes again). Either is an event in events.jsonl, the
  runner's episodes in progress start anew and its transitions not handed out are
  dropped, so none is counted twice. After `worker_max_restarts` the run stops as on an
  env failure: exit code 5, with a checkpoint.
- **A runner silent** for `worker_timeout` seconds: the run stops the same way.
- **The cluster lost** (its head, or the connection to it): every call to Ray fails from
  then on. The run stops the same way, with a checkpoint of the learner's side (the
  replay buffer, the agent, the episodes and transitions not handed out, the weights the
  runners acted with, each runner's next episode index and restarts); the runners' own
  state is gone with them, so a resumed run starts their episodes anew. A learner joined
  to the cluster as a Ray Client (`ray_address: ray://host:10001`) learns of the loss as
  an exception once Ray's reconnection grace period (30 s,
  `RAY_CLIENT_RECONNECT_GRACE_PERIOD`) is over; one that runs on a node of the cluster
  goes with that node's raylet: Ray ends its process, and its last periodic checkpoint
  is what is left.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from typing import Any, Callable, Iterator

from rltrain.scripts.workers.ray_start import init_ray
from rltrain.utils.errors import EnvFailure, UserError
from rltrain.utils.training.collector import Episode


class ClusterLost(EnvFailure):
    """The Ray cluster (its head, or the connection to it) is gone: exit code 5 as an env
    failure, with its own rule name and what to do before resuming."""

    rule = "ray_cluster"
    fixed = ("the cluster is back (or with --set ray_address=ADDRESS of another, or "
             "ray_address=null for runners on this machine)")


def last_line(exc: BaseException) -> str:
    """The last non-blank line of an exception's message (Ray's name the cause last)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def join_cluster(ray: Any, address: str | None, runtime_env: dict[str, Any] | None) -> None:
    """`ray.init`, or one line naming the address when the cluster cannot be joined."""
    try:
        init_ray(ray, address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env=runtime_env)
    except ConnectionError as exc:
        raise UserError(f"could not join the Ray cluster at ray_address '{address}': "
                        f"{last_line(exc)}") from None


class RunnerFaults:
    """The fault handling of `DistributedCollector`: runners lost, failing or silent, and
    the cluster lost. Its attributes are the collector's (see its `__init__`)."""

    ray: Any
    config: Any
    runners: list[Any]
    restarts: list[int]
    next_index: list[int]
    envs_per_runner: int
    pending: deque[Any]
    episodes: list[Episode]
    in_flight: dict[Any, int]
    weights: dict[str, Any] | None
    stats: Any
    cluster_gone: str | None  # why every call to Ray fails from now on (None: it does not)
    report: Callable[[str], None]  # a runner's fault the run goes on past: events.jsonl

    # ------------------------------------------------------------- the cluster
    @contextlib.contextmanager
    def ray_calls(self) -> Iterator[None]:
        """Calls to Ray that fail only when the cluster does: they become `ClusterLost`.
        A runner's own death (RayActorError) is not caught here. A Ray Client whose
        connection closed raises a bare Exception ("Ray Client is not connected"): any
        error raised once the connection is gone counts as the cluster lost."""
        self.check_cluster()
        try:
            yield
        except self._cluster_errors() as exc:
            raise self._cluster_lost(exc) from None
        except Exception as exc:
            if self.connected():
                raise
            raise self._cluster_lost(exc) from None

    def connected(self) -> bool:
        """Whether this process' Ray is still connected (a Ray Client's connection that
        closed, or a call that cannot tell, is not)."""
        try:
            return bool(self.ray.is_initialized())
        except Exception:  # gRPC's errors while the client reconnects
            return False

    def check_cluster(self) -> None:
        """Raise `ClusterLost` if the cluster was lost: no call to Ray can succeed."""
        if self.cluster_gone is not None:
            raise ClusterLost(self.cluster_gone, self.cluster_gone + "\n")

    def _cluster_errors(self) -> tuple[type[BaseException], ...]:
        # A Ray Client disconnected raises ConnectionError; a node's lost GCS or raylet
        # RaySystemError; a dead runner is RayActorError and a slow one GetTimeoutError.
        return ConnectionError, self.ray.exceptions.RaySystemError

    def _cluster_lost(self, exc: BaseException) -> ClusterLost:
        where = f" at {self.config.ray_address}" if self.config.ray_address else ""
        self.cluster_gone = f"the Ray cluster{where} was lost: {last_line(exc)}"
        return ClusterLost(self.cluster_gone, f"{self.cluster_gone}\n{exc!r}\n")

    # ----------------------------------------------------------------- runners
    def _get(self, runner: int, ref: Any) -> dict[str, Any] | None:
        """A runner's chunk; None if its process died while it collected."""
        try:
            with self.ray_calls():
                return self.ray.get(ref, timeout=self.config.worker_timeout)
        except self.ray.exceptions.GetTimeoutError:
            self._timed_out([runner])
        except self.ray.exceptions.RayActorError as exc:
            if not self.connected():  # its client's connection closed with it
                raise self._cluster_lost(exc) from None
            return None
        except self.ray.exceptions.RayError as exc:  # any other: the cluster itself
            raise self._cluster_lost(exc) from None

    def _check(self, runner: int, chunk: dict[str, Any] | None) -> None:
        """A runner lost (its process died, or Ray restarted it since its last chunk) or
        failed (its env raised) is started again, or the run stops."""
        if chunk is None:
            self._runner_lost(runner, "its process died while it collected")
        elif chunk["restarted"]:
            self._runner_lost(runner, "its process died and Ray restarted it")
        elif chunk["failure"] is not None:
            self._runner_failed(runner, *chunk["failure"])

    def _timed_out(self, runners: list[int]) -> None:
        names = ", ".join(str(i) for i in runners)
        problem = (f"env runner{'s' if len(runners) > 1 else ''} {names} sent no transitions "
                   f"in {self.config.worker_timeout:g} s (worker_timeout)")
        raise EnvFailure(problem, problem + "\n")

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
        self.in_flight = {ref: i for ref, i in self.in_flight.items() if i != runner}
        if not self._call_restarted(runner, "start", self.next_index[runner]):
            raise EnvFailure(f"{problem}; Ray could not restart it within "
                             f"{self.config.worker_timeout:g} s (worker_timeout)", details)
        self.episodes_anew(runner)
        if self.weights is not None:
            with self.ray_calls():
                self.runners[runner].set_weights.remote(self.ray.put(self.weights))

    def episodes_anew(self, runner: int) -> None:
        """The learner's side of a runner that started new episodes at its next index:
        its transitions not handed out are dropped, its envs' episodes counted anew."""
        first = self.next_index[runner]
        self.next_index[runner] = first + self.envs_per_runner
        envs = range(runner * self.envs_per_runner, (runner + 1) * self.envs_per_runner)
        self.pending = deque(t for t in self.pending if t.env not in envs)
        for env in envs:
            self.episodes[env] = Episode(index=first + env % self.envs_per_runner,
                                         obs=self.episodes[env].obs)

    def _call_restarted(self, runner: int, method: str, *args: Any) -> bool:
        """Call `method` of a runner whose process Ray may still be restarting: calls fail
        until it is back, so they are tried again until `worker_timeout`."""
        deadline = time.monotonic() + self.config.worker_timeout
        while True:
            try:
                with self.ray_calls():
                    ref = getattr(self.runners[runner], method).remote(*args)
                    self.ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
                return True
            except self.ray.exceptions.GetTimeoutError:
                return False
            except self.ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)
