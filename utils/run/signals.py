"""Ctrl-C and the signals that end a process as pause requests: the first one asks, a
second Ctrl-C aborts.

SIGTERM (`kill`, a preempted job), SIGHUP (the terminal closed) and SIGUSR1/SIGUSR2
(what SLURM's `--signal` sends before a job's time limit) each pause the run with a
checkpoint as Ctrl-C does: left to their default action they ended the process at once,
with no checkpoint and no reason written.

The handler only records the signal. It can run between any two bytecodes (inside an
import, a log write, a checkpoint write), so anything more than setting a field is
unsafe there: the training loop reads `received` after each env step and pauses
through the monitor like any other request. (A handler that printed through rich
crashed inside a half-finished import under load, before this was so.)
"""

from __future__ import annotations

import signal
from types import FrameType, TracebackType

from rltrain.utils.errors import Aborted
from rltrain.utils.training.env_clock import ENV_CLOCK, clock_supported

# Every signal that pauses a run (those this platform has: Windows has no SIGHUP).
PAUSE_SIGNALS = tuple(getattr(signal, name) for name in
                      ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
                      if hasattr(signal, name))


class SignalCatcher:
    """Context manager: each of PAUSE_SIGNALS sets `received`; a second SIGINT raises
    `Aborted`.
    It also makes the env calls' clock live (SIGALRM): a call into the env that hangs is
    abandoned at its timeout, or at a pause request once it has lasted a while."""

    def __init__(self) -> None:
        self.received: tuple[str, str] | None = None  # (rule, message)
        self._previous: dict[int, object] = {}
        self._settled = False

    def settle(self) -> None:
        """The run's outcome is decided (its checkpoint written or its error raised): from
        now on no signal aborts the cleanup."""
        self._settled = True

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and self.received is not None and not self._settled:
            raise Aborted  # the second Ctrl-C: abort at once
        if self.received is None:
            rule = "interrupt" if signum == signal.SIGINT else "terminate"
            self.received = (rule, f"{signal.Signals(signum).name} received")
        if not self._settled:
            ENV_CLOCK.interrupted(f"{signal.Signals(signum).name} came")  # a hung env call

    @staticmethod
    def _alarm(_signum: int, _frame: FrameType | None) -> None:
        ENV_CLOCK.alarm()

    def __enter__(self) -> SignalCatcher:
        try:
            self._previous = {s: signal.signal(s, self._handle) for s in PAUSE_SIGNALS}
        except ValueError:  # not the main thread (e.g. a Ray worker): no handlers
            self._previous = {}
            return self
        if clock_supported():  # env calls are timed (utils/training/env_clock.py)
            self._previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._alarm)
            ENV_CLOCK.live = True
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if signal.SIGALRM in self._previous:
            ENV_CLOCK.live, ENV_CLOCK.pause_asked = False, None
            ENV_CLOCK.leave()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
