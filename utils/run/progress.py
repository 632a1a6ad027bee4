"""Live progress: a rich progress bar on a terminal, plain periodic lines otherwise.

Shows env steps, steps/s, the last episode return, the best evaluation and the ETA.
The training loop calls `update` every few hundred steps; the display throttles itself.
"""

from __future__ import annotations

import os
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Evaluation, Hook

PLAIN_EVERY_SECONDS = 10.0


def drop_stdout() -> None:
    """The reader of stdout has gone (`rltrain train ... | head`): what training prints from
    now on goes nowhere, and the run goes on (its logs are its record)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def say(text: str) -> None:
    """Print a line of training's own (the run's header, its outcome); a reader of stdout
    that has gone must not end the run or change its exit code."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        drop_stdout()


class _TrainingConsole(Console):
    def on_broken_pipe(self) -> None:  # rich's default ends the process
        self.quiet = True
        drop_stdout()


def format_eta(seconds: float | None) -> str:
    """`H:MM:SS`, with days beyond 24 hours (`3d 04:05:06`); "n/a" when unknown or beyond
    a year (gmtime wrapped at 24 hours, and failed on ETAs beyond its range)."""
    if seconds is None or not seconds >= 0 or seconds > 365 * 86400:
        return "n/a" if seconds is None or not seconds >= 0 else "> 1 year"
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}d {text}" if days else text


class _EtaColumn(TimeRemainingColumn):
    """rich's time remaining, in `format_eta`'s form (rich's own overflows beyond
    timedelta's range, with step counts near 2**63)."""

    def render(self, task) -> Text:  # type: ignore[no-untyped-def]
        return Text(format_eta(task.time_remaining), style="progress.remaining")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


class ProgressDisplay:
    """Progress of one training run; `interactive=None` picks by whether stdout is a tty."""

    def __init__(self, total_steps: int, start_steps: int, interactive: bool | None = None,
                 console: Console | None = None):
        self.total = total_steps
        if interactive is None:  # no stdout (closed): nothing to draw on
            interactive = sys.stdout is not None and sys.stdout.isatty()
        self.interactive = interactive
        self.console = console or _TrainingConsole(highlight=False, soft_wrap=True)
        self._last_plain = time.monotonic()
        # Set at the first update: the run's start-up (envs, logs) is no env step's time.
        self._rate_mark: tuple[float, int] | None = None
        self._rate = 0.0
        self._bar: Progress | None = None
        if self.interactive:
            # The numbers need about 73 columns (a 6-digit total, 4-digit returns); the bar
            # gets what is left, so that an 80-column terminal still shows all of them.
            bar_width = max(5, min(40, self.console.width - 75 - 2 * len(str(total_steps))))
            self._bar = Progress(
                TextColumn("[bold]train"), BarColumn(bar_width=bar_width), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]} steps/s"),
                TextColumn("last return {task.fields[last]}"),
                TextColumn("best eval {task.fields[best]}"),
                _EtaColumn(), console=self.console, transient=False)
            self._task = self._bar.add_task("train", total=total_steps, completed=start_steps,
                                            rate="-", last="n/a", best="n/a")
            self._bar.start()

    def update(self, env_steps: int, last_return: float | None,
               best_eval: float | None) -> None:
        now = time.monotonic()
        if self._rate_mark is None:
            self._rate_mark = (now, env_steps)
        mark_time, mark_steps = self._rate_mark
        # The speed over the window so far, as soon as it is half a second long (the
        # warm-up's hundreds of steps/s showed as 0 until a full window had passed); a new
        # window every 2 s, so that the speed follows the run (slower once it updates).
        if now - mark_time >= 0.5 and env_steps > mark_steps:
            self._rate = (env_steps - mark_steps) / (now - mark_time)
        if now - mark_time >= 2.0:
            self._rate_mark = (now, env_steps)
        if self._bar is not None:
            self._bar.update(self._task, completed=env_steps, rate=f"{self._rate:.0f}",
                             last=_fmt(last_return), best=_fmt(best_eval))
        elif now - self._last_plain >= PLAIN_EVERY_SECONDS:
            self._last_plain = now
            eta = (self.total - env_steps) / self._rate if self._rate > 0 else None
            eta_text = format_eta(eta)
            self.console.print(f"step {env_steps}/{self.total} | {self._rate:.0f} steps/s | "
                               f"last return {_fmt(last_return)} | best eval "
                               f"{_fmt(best_eval)} | ETA {eta_text}", markup=False)

    def message(self, text: str) -> None:
        """A line above the bar (or a plain line)."""
        self.console.print(text, markup=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class ProgressHook(Hook):
    """Feeds the display every 100 env steps: the latest episode return and the best
    evaluation, as the hooks are told of them."""

    name = "progress"
    step_end_every = 100

    def __init__(self, display: ProgressDisplay, last_return: float | None,
                 best_eval: float | None) -> None:
        self.display, self.last_return, self.best_eval = display, last_return, best_eval

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        self.last_return = episode.episode_return
        return []

    def on_eval(self, evaluation: Evaluation) -> list[Finding]:
        # Shown at once: an evaluation comes after its step's update of the display, and
        # the display's last state (the final line) must not keep the best from before it.
        self.best_eval = evaluation.best
        self.display.update(evaluation.env_steps, self.last_return, self.best_eval)
        return []

    def on_step_end(self, env_steps: int) -> list[Finding]:
        if env_steps % 100 == 0:
            self.display.update(env_steps, self.last_return, self.best_eval)
        return []
