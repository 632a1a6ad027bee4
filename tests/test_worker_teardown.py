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
    ray = SimpleNamespace(shutdown=lambda: never.wait(), kill=lambda runner: None)
    start = time.monotonic()
    collector("the Ray cluster was lost", ray).close()
    assert time.monotonic() - start < 5
    assert unregistered == [ray.shutdown]  # Ray's exit hook would wait the same
    never.set()


def test_with_the_cluster_there_ray_is_shut_down_in_this_thread():
    calls = []
    ray = SimpleNamespace(shutdown=lambda: calls.append(threading.current_thread()),
                          kill=lambda runner: calls.append(runner))
    c = collector(None, ray)
    c.runners = ["a", "b"]
    c.close()
    assert calls == ["a", "b", threading.current_thread()]
