"""How long the env has been inside one call, and what happens when it does not return.

An env is untrusted code: its `step()` or `reset()` can hang (a simulator waiting on a
socket, a deadlock, an endless loop). `env_code` (utils/training/envs.py) times every
call into the env with the process's one `ENV_CLOCK`. While the training loop runs, its
signal handlers (utils/run/signals.py) make the clock's alarm live:

- after `notice_after` seconds in one call, `on_stuck` is told (the run writes status
  "stuck", so `rltrain status` shows it, and "running" again if the call returns);
- after `timeout` seconds (config `env_step_timeout`), the call is abandoned with
  `EnvHung`, an env failure: the run stops with a paused checkpoint of the state before
  the call, exit code 5, like an env that raises;
- a Ctrl-C, SIGTERM or `rltrain pause` that comes while a call has already lasted
  `notice_after` seconds abandons it the same way, instead of waiting for it.

The alarm is SIGALRM (`signal.setitimer`), so it works on POSIX systems, in the main
thread, and interrupts Python code and blocking system calls (sleeps, pipes, sockets),
not a C extension that loops without returning to Python. Elsewhere calls are not timed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Callable, Iterator

from rltrain.utils.errors import EnvFailure

NOTICE_AFTER = 30.0  # seconds in one env call before the run says it is stuck


class EnvHung(EnvFailure):
    """An env call that did not return in time, or that a pause request abandoned."""


class EnvClock:
    """Times calls into the env (see the module's docstring). Only the main thread arms
    the alarm, and only while `live` (the trainer's signal handlers are installed)."""

    def __init__(self) -> None:
        self.timeout: float | None = None
        self.notice_after = NOTICE_AFTER
        self.on_stuck: Callable[[str, float], None] | None = None
        self.on_unstuck: Callable[[], None] | None = None  # a noticed call did return
        self.live = False
        self.call: str | None = None  # the call in progress, if timed
        self.env_name = ""
        self.started = 0.0
        self._noticed = False
        self.pause_asked: str | None = None  # a pause request that came during a call

    @contextlib.contextmanager
    def watching(self, timeout: float | None, on_stuck: Callable[[str, float], None],
                 on_unstuck: Callable[[], None]) -> Iterator[None]:
        """Time the env's calls with `timeout` for as long as a run lasts."""
        self.timeout, self.on_stuck, self.on_unstuck = timeout, on_stuck, on_unstuck
        try:
            yield
        finally:
            self.timeout, self.on_stuck, self.on_unstuck = None, None, None

    def enter(self, env_name: str, call: str) -> bool:
        """A call into the env starts; True if it is timed (then `leave` must follow)."""
        if not self.live or self.call is not None or \
                threading.current_thread() is not threading.main_thread():
            return False
        self.call, self.env_name, self.started, self._noticed = call, env_name, \
            time.monotonic(), False
        self._arm(self._first_alarm())
        return True

    def leave(self) -> None:
        self._arm(0.0)
        noticed, self.call, self._noticed = self._noticed, None, False
        if noticed and self.on_unstuck is not None:
            self.on_unstuck()

    def elapsed(self) -> float:
        return time.monotonic() - self.started if self.call is not None else 0.0

    def alarm(self) -> None:
        """SIGALRM: tell `on_stuck`, or abandon the call once past the timeout."""
        if self.call is None:
            return
        elapsed = self.elapsed()
        if self.timeout is not None and elapsed >= self.timeout:
            self._abandon(f"did not return from {self.call} within {self.timeout:g} s "
                          f"(env_step_timeout)")
        if self.pause_asked is not None and elapsed >= self.notice_after:
            self._abandon(f"was still in {self.call} after {elapsed:.0f} s when "
                          f"{self.pause_asked}; the call was abandoned")
        if not self._noticed and elapsed >= self.notice_after:
            self._noticed = True
            if self.on_stuck is not None:
                self.on_stuck(self.call, elapsed)
        self._arm(self._next_alarm(elapsed))

    def interrupted(self, what: str) -> None:
        """A pause request (`what`: "SIGTERM received"...) came: a call that has lasted
        `notice_after` seconds is abandoned now, a younger one once it has."""
        if self.call is None:
            return
        self.pause_asked = what
        if self.elapsed() >= self.notice_after:
            self.alarm()

    def _abandon(self, problem: str) -> None:
        self._arm(0.0)
        call, self.call = self.call, None
        message = f"env '{self.env_name}' {problem}"
        raise EnvHung(message, f"{message}\n(in {call}: the env's own code never returned)\n")

    def _first_alarm(self) -> float:
        return min(self.notice_after, self.timeout) if self.timeout is not None \
            else self.notice_after

    def _next_alarm(self, elapsed: float) -> float:
        if self.timeout is None:
            return 0.0 if self._noticed else self.notice_after - elapsed
        return max(self.timeout - elapsed, 0.001)

    @staticmethod
    def _arm(seconds: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, seconds)


ENV_CLOCK = EnvClock()


def clock_supported() -> bool:
    return hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
