"""The diagnostics' own bookkeeping: what their calls cost the run."""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

from rltrain.utils.run.device import OneBlasThread


def timed(method: Callable) -> Callable:
    """Add the wall time of a call to `self.seconds`: what the diagnostics cost the run
    (the trainer logs its share, `time/diagnostics_share`). A timed call made
    inside another (the actor hook during an evaluation check) is counted once. The
    call runs with numpy's BLAS on one thread (`OneBlasThread`)."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.timing:
            return method(self, *args, **kwargs)
        self.timing, start = True, time.perf_counter()
        try:
            with OneBlasThread():
                return method(self, *args, **kwargs)
        finally:
            self.timing = False
            self.seconds += time.perf_counter() - start
    return wrapper


def hook_method(method: Callable) -> Callable:
    """A timed hook method that returns the findings made during the call."""
    @timed
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any) -> list[Any]:
        method(self, *args)
        found, self.pending = self.pending, []
        return found
    return wrapper
