"""Ray's start on a loaded machine: its node's 30 s start-up limit (written into Ray) is
tried again, not a failed sweep or run; every other error goes on as it was."""

from __future__ import annotations

import pytest

from rltrain.scripts.workers.ray_start import init_ray


class SlowRay:
    """A `ray` module whose first `failures` starts time out as Ray's do."""

    def __init__(self, failures: int, error: str = "The current node timed out during "
                 "startup. This could happen because some of the raylet failed to startup "
                 "or the GCS has become overloaded.") -> None:
        self.failures, self.error = failures, error
        self.calls: list[str] = []

    def init(self, **kwargs) -> None:
        self.calls.append("init")
        if self.calls.count("init") <= self.failures:
            raise Exception(self.error)  # Ray raises a bare Exception for it

    def shutdown(self) -> None:
        self.calls.append("shutdown")


def test_a_start_that_times_out_is_tried_again():
    ray = SlowRay(failures=2)
    init_ray(ray, num_cpus=2)
    assert ray.calls == ["init", "shutdown", "init", "shutdown", "init"]


def test_a_start_that_keeps_timing_out_fails_after_three_tries():
    ray = SlowRay(failures=5)
    with pytest.raises(Exception, match="timed out during startup"):
        init_ray(ray)
    assert ray.calls.count("init") == 3


def test_any_other_error_of_the_start_is_not_retried():
    ray = SlowRay(failures=1, error="could not connect")
    with pytest.raises(Exception, match="could not connect"):
        init_ray(ray)
    assert ray.calls == ["init"]
