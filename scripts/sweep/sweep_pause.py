"""Ctrl-C on `rltrain sweep`: pause the running trials with a checkpoint, then stop Tune.

Ray Tune's own Ctrl-C handling stops the trials at once: each would lose its env steps
since its newest periodic checkpoint. `SweepPause`, a Tune callback, takes the first
Ctrl-C in Tune's place. It asks every running trial to pause (a `pause.request` in its
run folder, as `rltrain pause` writes; the trial pauses through its normal pause path
after its current env step), waits until each has reported its paused checkpoint to
Tune or has stopped (at most PAUSE_WAIT_SECONDS; a second Ctrl-C ends the wait), and
then hands the Ctrl-C on to Tune's handler, which saves the experiment state and stops
the trials. A trial paused so returns only after that hand-over (`wait_for_hand_over`):
Tune saves it as unfinished, and `rltrain sweep --resume` continues it from its paused
checkpoint.

Only the driver gets the Ctrl-C: Ray runs each trial's worker in a process group of its
own, which a terminal's Ctrl-C does not reach.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click
from ray.tune import Callback

from rltrain.utils.run.folders import PAUSE_REQUEST_FILE
from rltrain.utils.run.sweep_summary import INTERRUPTED_NOTE

PAUSE_WAIT_SECONDS = 60.0
HANDED_ON_FILE = "tune_interrupted"  # in the sweep folder, from the hand-over to Tune
HAND_OVER_WAIT_SECONDS = 5 * PAUSE_WAIT_SECONDS  # the hand-over comes within the first


class SweepPause(Callback):
    """Installed over Tune's SIGINT handler at the start of `Tuner.fit`; the handler only
    counts, the work is done between Tune's loop steps (`on_step_end`)."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir  # pickled with the Tuner: only what `--resume` needs

    def setup(self, **info: Any) -> None:
        self.ctrl_c, self.asked_at, self.handed_on = 0, None, False
        self.paused: set[str] = set()  # trial ids whose paused checkpoint Tune holds
        try:
            self.tune_handler = signal.signal(signal.SIGINT, self._count)
        except ValueError:  # not the main thread: Tune cannot catch it either
            self.handed_on = True

    def _count(self, _signum: int, _frame: FrameType | None) -> None:
        self.ctrl_c += 1  # anything more is unsafe in a signal handler

    def on_checkpoint(self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any,
                      **info: Any) -> None:
        if trial.last_result.get("status") == "paused":  # the report this checkpoint came with
            self.paused.add(trial.trial_id)

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if not self.ctrl_c or self.handed_on:
            return
        waiting = [t for t in trials if t.status == t.RUNNING and t.trial_id not in self.paused]
        if self.asked_at is None:
            self.asked_at = time.monotonic()
            if waiting:
                click.echo(f"sweep: Ctrl-C: pausing {len(waiting)} running trial(s) with a "
                           f"checkpoint (up to {PAUSE_WAIT_SECONDS:.0f} s; Ctrl-C again to "
                           "stop them without one)")
        # Asked again while they run: a trial that was starting deletes the request it
        # finds (one meant for an earlier process), and one may start while we wait.
        waiting = [t for t in waiting if self._ask(self._folder(t))]
        if waiting and self.ctrl_c == 1 and time.monotonic() - self.asked_at < PAUSE_WAIT_SECONDS:
            return
        if waiting:
            click.echo(f"sweep: {len(waiting)} trial(s) did not pause; Tune stops them "
                       "(they continue from their newest checkpoint)", err=True)
        self._hand_on()

    def _folder(self, trial: Any) -> Path:
        return self.sweep_dir / trial.config["trial"]["run_name"]

    @staticmethod
    def _ask(folder: Path) -> bool:
        """Leave a pause request in a trial's run folder, if it has one yet (creating it
        would make it look like a run). False: the request cannot be written."""
        request = folder / PAUSE_REQUEST_FILE
        if folder.is_dir() and not request.exists():
            try:
                request.write_text(INTERRUPTED_NOTE)
            except OSError as exc:
                click.echo(f"sweep: cannot ask {folder.name} to pause: {exc}", err=True)
                return False
        return True

    def _hand_on(self) -> None:
        """Tune's handler gets the Ctrl-C, as if it had come now: Tune's loop ends after
        this step, it saves the experiment state (the paused trials running, so
        unfinished) and then stops every trial."""
        self.handed_on = True
        # Without this file the paused trials wait until Tune kills them (10 s later).
        with contextlib.suppress(OSError):
            (self.sweep_dir / HANDED_ON_FILE).write_text("")
        signal.signal(signal.SIGINT, self.tune_handler)
        signal.raise_signal(signal.SIGINT)


def wait_for_hand_over(sweep_dir: Path) -> None:
    """Where a trial paused by the sweep's Ctrl-C waits. Returning earlier would end its
    Tune trial as terminated, which `--resume` does not continue; after the hand-over
    Tune's loop takes no more results before it saves the experiment state. Tune stops
    the trial about 10 s after the hand-over, file or not; the bound only keeps a worker
    from waiting forever for a driver that is gone (its paused checkpoint stays, and
    `rltrain resume` continues it)."""
    deadline = time.monotonic() + HAND_OVER_WAIT_SECONDS
    while not (sweep_dir / HANDED_ON_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
