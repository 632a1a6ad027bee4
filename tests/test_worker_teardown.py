"""The env runners' collector ending after its Ray cluster was lost: Ray's teardown may
wait on a connection that never comes back, and the run, its checkpoint written, must
still end (scripts/workers/distributed.py `close`)."""

from __future__ import annotations

import atexit
import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("ray")

from rltrain.scripts.workers import distributed  # noqa: E402


def collector(gone: str | None, ray: object) -> distributed.DistributedCollector:
    c = object.__new__(distributed.DistributedCollector)
    c.ray, c.runners, c.owns_ray, c.cluster_gone = ray, [], True, gone
    return c


def test_a_teardown_that_hangs_after_the_cluster_is_lost_does_not_hold_the_run(monkeypatch):
    monkeypatch.setattr(distributed, "SHUTDOWN_WAIT", 0.2)
    never = threading.Event()
    unregistered = []
    monkeypatch.setattr(atexit, "unregister", unregistered.append)
    ray = SimpleNamespace(shutdown=lambda: never.wait(), kill=lambda runner: None,
                          is_initialized=lambda: True)
    start = time.monotonic()
    collector("the Ray cluster was lost", ray).close()
    assert time.monotonic() - start < 5
    assert unregistered == [ray.shutdown]  # Ray's exit hook would wait the same
    never.set()


def test_with_the_cluster_there_ray_is_shut_down_in_this_thread():
    calls = []
    ray = SimpleNamespace(shutdown=lambda: calls.append(threading.current_thread()),
                          kill=lambda runner: calls.append(runner), is_initialized=lambda: True)
    c = collector(None, ray)
    c.runners = ["a", "b"]
    c.close()
    assert calls == ["a", "b", threading.current_thread()]


def test_a_connection_closed_is_a_lost_cluster_no_call_to_ray_starts_another(monkeypatch):
    """A Ray Client whose connection closed is not initialized any more: `ray.kill` then
    would start a Ray of its own (its auto-init) and wait for a cluster that is gone."""
    monkeypatch.setattr(distributed, "SHUTDOWN_WAIT", 0.2)
    monkeypatch.setattr(atexit, "unregister", lambda hook: None)
    calls = []
    ray = SimpleNamespace(shutdown=lambda: calls.append("shutdown"),
                          kill=lambda runner: calls.append(runner), is_initialized=lambda: False)
    c = collector(None, ray)
    c.runners = ["a", "b"]
    c.close()
    assert calls == ["shutdown"] and c.runners == []  # in its thread, bounded


class _Exceptions:
    class RaySystemError(Exception):
        pass


def sending(error: Exception, connected: bool) -> distributed.DistributedCollector:
    """A collector whose weights' `ray.put` raises `error`, with Ray connected or not."""
    def put(value):
        raise error

    ray = SimpleNamespace(put=put, is_initialized=lambda: connected, exceptions=_Exceptions)
    c = collector(None, ray)
    c.config = SimpleNamespace(ray_address="ray://head:10001")
    c.weights = {}
    return c


def test_a_call_after_the_client_connection_closed_is_the_cluster_lost():
    """Sending the weights once the Ray Client's connection closed raised a bare
    Exception ("Ray Client is not connected") past the run: it is the cluster lost."""
    from rltrain.scripts.workers.worker_faults import ClusterLost

    c = sending(Exception("Ray Client is not connected. Please connect by calling "
                          "`ray.init`."), connected=False)
    with pytest.raises(ClusterLost, match="was lost: Ray Client is not connected"):
        c._send_weights()
    with pytest.raises(ClusterLost):  # and every call after it
        c._send_weights()


def test_an_error_while_connected_is_not_taken_for_a_lost_cluster():
    c = sending(ValueError("a bug of ours"), connected=True)
    with pytest.raises(ValueError, match="a bug of ours"):
        c._send_weights()
    assert c.cluster_gone is None


def test_a_checkpoint_taken_as_the_connection_closes_saves_no_runner_state():
    """The connection closing between two runners' states: the checkpoint is still
    written, with every runner's episodes to start anew."""
    class Runner:
        state_dict = SimpleNamespace(remote=lambda: "ref")

    connection = {"open": True}

    def get(ref, timeout=None):
        connection["open"] = False
        raise Exception("Ray Client is not connected. Please connect by calling `ray.init`.")

    exceptions = SimpleNamespace(RaySystemError=_Exceptions.RaySystemError,
                                 RayError=type("RayError", (Exception,), {}))
    ray = SimpleNamespace(get=get, is_initialized=lambda: connection["open"],
                          exceptions=exceptions)
    c = collector(None, ray)
    c.config = SimpleNamespace(ray_address="", worker_timeout=1.0)
    c.runners, c.in_flight, c.num_runners = [Runner(), Runner()], {}, 2
    assert c._runner_states() == [None, None]
