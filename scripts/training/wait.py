"""A run from its start to its end: it tells its `notify:` targets what happened, and with
`--wait` (or `on_pause: wait`) a paused run's process waits for an instruction.

A paused run can tell an operator and wait for an outside instruction:
continue, change parameters and continue, or stop. Waiting, the process keeps the run's
lock (no other process can resume into its folders), uses no CPU (it sleeps, and looks
for `<log_dir>/<run>/instruction.request` twice a second) and answers:
- `rltrain continue RUN [--set KEY=VALUE ...]`: the run goes on in this process, rebuilt
  from the paused checkpoint exactly as `rltrain resume --checkpoint ... --set ...`
  rebuilds it (the same function: same checks, same record in events.jsonl, the same
  weights bit for bit on CPU); a change resume would refuse is refused, the run waits on;
- `rltrain stop RUN`, `wait_timeout` seconds without an instruction, Ctrl-C or SIGTERM:
  the process ends with exit code 3, as a pause without --wait does.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rltrain.scripts.training.outcome import RunOutcome
from rltrain.scripts.training.resume import prepare_resume
from rltrain.scripts.training.run_notify import (
    answer_commands,
    crash_event,
    outcome_event,
    warning_event,
)
from rltrain.scripts.training.run_state import ResumeInfo
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import write_json
from rltrain.utils.run.folders import TAKEN_FILE, RunLock, RunPaths
from rltrain.utils.run.logger import append_event
from rltrain.utils.run.notify import Notifier
from rltrain.utils.run.progress import say
from rltrain.utils.run.signals import SignalCatcher
from rltrain.utils.run.status import read_status, write_status

POLL_SECONDS = 0.5
Resumed = tuple[Trainer, RunPaths, ResumeInfo]


@dataclass(frozen=True)
class Instruction:
    action: str  # "continue" or "stop" (from a request file), "timeout", "signal", "unreadable"
    overrides: tuple[str, ...] = ()
    request_id: str | None = None
    argv: tuple[str, ...] = ()
    reason: str = ""


def supervise(trainer: Trainer, paths: RunPaths, resume: ResumeInfo | None, wait: bool,
              announce: Callable[[RunOutcome], None]) -> RunOutcome:
    """Train to the end, notifying; after a pause wait for an instruction if asked to.
    `announce` prints a pause before the process waits."""
    notifier = Notifier(trainer.config.notify, paths.events_file)
    lock: RunLock | None = None
    try:
        while True:
            # Kept when the trainer closes: held here while the process waits.
            lock, trainer.run_lock = trainer.run_lock, None
            outcome = _run(trainer, paths, resume, notifier)
            config, interactive = trainer.config, trainer.interactive
            waits = outcome.status == "paused" and (wait or config.on_pause == "wait")
            notifier.send(outcome_event(paths, config, outcome, waits))
            if not waits:
                return outcome
            announce(outcome)
            trainer = None  # type: ignore[assignment]  # its replay buffer, before the next
            resumed = wait_after_pause(paths, outcome, config, interactive, lock)
            if resumed is None:
                return outcome
            trainer, paths, resume = resumed
            if trainer.config.notify != notifier.config:  # changed by `continue --set`
                notifier.close()
                notifier = Notifier(trainer.config.notify, paths.events_file)
    finally:
        if lock is not None:
            lock.release()
        notifier.close()


def _run(trainer: Trainer, paths: RunPaths, resume: ResumeInfo | None,
         notifier: Notifier) -> RunOutcome:
    """`trainer.run`, with a crash event for an exception out of it."""
    if notifier.wants("warning"):
        def warned(env_steps: int, fields: dict[str, Any]) -> None:
            if fields.get("action") == "warn":
                notifier.send(warning_event(paths, trainer.config, env_steps, fields))
        trainer.on_event = warned
    try:
        return trainer.run(paths, resume)
    except (Exception, KeyboardInterrupt) as exc:  # KeyboardInterrupt: a second Ctrl-C
        notifier.send(crash_event(paths, trainer.config, trainer.state.counters.env_steps, exc))
        raise


def wait_after_pause(paths: RunPaths, outcome: RunOutcome, config: TrainConfig,
                     interactive: bool | None, lock: RunLock | None) -> Resumed | None:
    """Wait for an instruction; the resumed trainer on `continue`, None when the wait ends
    without one (the paused checkpoint stays as it was). `config`: the run's, whose
    commands and folders the continued run keeps (the checkpoint's are not trusted)."""
    assert outcome.checkpoint is not None
    timeout = config.wait_timeout
    checkpoint = str(outcome.checkpoint)
    deadline = None if timeout is None else time.monotonic() + timeout
    paths.instruction_file.unlink(missing_ok=True)  # meant for an earlier process
    with SignalCatcher() as signals:
        signals.settle()  # the checkpoint is written: a second Ctrl-C need not abort
        since = time.time()
        mark_waiting(paths, checkpoint, since, None if timeout is None else since + timeout)
        say(f"waiting for an instruction (pid {os.getpid()}): "
            + " or ".join(answer_commands(paths.name))
            + ("" if timeout is None else f"; exits with code 3 after {timeout:g} s"))
        while True:
            instruction = next_instruction(paths.instruction_file, signals, deadline)
            if instruction.action in ("continue", "stop"):
                # Which one it took: of two given at once, the other is told it was not.
                write_json(paths.log_dir / TAKEN_FILE,
                           {"id": instruction.request_id, "action": instruction.action})
            if instruction.action in ("stop", "timeout", "signal"):
                end_wait(paths, outcome.env_steps, instruction.reason)
                return None
            if instruction.action == "continue":
                try:
                    resumed = prepare_resume(checkpoint, instruction.overrides, None,
                                             interactive, lock, trusted=config)
                except UserError as exc:
                    refuse(paths, outcome.env_steps, instruction, str(exc))
                    continue
                if signals.received is not None:  # came while it loaded: end as asked
                    resumed[0].run_lock = None  # still this process's, released at its end
                    resumed[0].close()
                    end_wait(paths, outcome.env_steps, f"{signals.received[1]} while waiting")
                    return None
                resumed[0].argv = list(instruction.argv)
                say(f"continuing ({', '.join(resumed[2].changes) or 'no changes'})")
                return resumed
            refuse(paths, outcome.env_steps, instruction, instruction.reason)


def next_instruction(request_file: Path, signals: SignalCatcher,
                     deadline: float | None) -> Instruction:
    """Sleep until a request file, a signal or the deadline comes."""
    while True:
        if signals.received is not None:
            return Instruction("signal", reason=f"{signals.received[1]} while waiting")
        instruction = take_instruction(request_file)
        if instruction is not None:
            return instruction
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return Instruction("timeout", reason="no instruction within wait_timeout")
        time.sleep(POLL_SECONDS if deadline is None else min(POLL_SECONDS, deadline - now))


def write_instruction(request_file: Path, action: str, overrides: tuple[str, ...] = (),
                      argv: list[str] | None = None) -> str:
    """Leave an instruction for a waiting run; returns its id (status.json names the id
    of a refused one)."""
    request_id = uuid.uuid4().hex
    write_json(request_file, {"id": request_id, "action": action, "overrides": list(overrides),
                              "argv": argv or []})
    return request_id


def take_instruction(request_file: Path) -> Instruction | None:
    """The instruction in `request_file` (removed), or None if there is none."""
    try:
        text = request_file.read_text()
    except OSError:
        return None
    request_file.unlink(missing_ok=True)
    try:
        data = json.loads(text)
        action, overrides = data["action"], tuple(str(o) for o in data.get("overrides", ()))
        argv = tuple(str(a) for a in data.get("argv", ()))
        request_id = str(data["id"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return Instruction("unreadable", reason=f"'{request_file}' is not an instruction "
                           "written by `rltrain continue` or `rltrain stop`")
    if action not in ("continue", "stop"):
        return Instruction("unreadable", request_id=request_id,
                           reason=f"unknown instruction {action!r}")
    reason = "stopped by `rltrain stop`" if action == "stop" else ""
    return Instruction(action, overrides, request_id, argv, reason)


def mark_waiting(paths: RunPaths, checkpoint: str, since: float, until: float | None,
                 refused: dict[str, str] | None = None) -> None:
    """status.json stays "paused" (what `rltrain pause` and sweeps wait for) and says
    that this process waits, since when, for which checkpoint, and how to answer it."""
    status = read_status(paths.status_file) or {}
    status["waiting"] = {"since": round(since, 3), "until": until,
                         "checkpoint": str(Path(checkpoint).resolve()),
                         "answer_with": answer_commands(paths.name), "refused": refused}
    write_status(paths.status_file, status)


def refuse(paths: RunPaths, env_steps: int, instruction: Instruction, problem: str) -> None:
    """A change that cannot apply: recorded, answered in status.json; the run waits on."""
    say(f"refused `rltrain continue`: {problem}; still waiting")
    append_event(paths.events_file, env_steps, rule="continue", value=list(instruction.overrides),
                 threshold=None, action="refused", message=problem)
    status = read_status(paths.status_file) or {}
    waiting = status.get("waiting") or {}
    mark_waiting(paths, waiting.get("checkpoint", ""), waiting.get("since", time.time()),
                 waiting.get("until"), {"id": instruction.request_id or "", "message": problem})


def end_wait(paths: RunPaths, env_steps: int, reason: str) -> None:
    """The process stops waiting and ends; the run stays paused at its checkpoint."""
    say(f"no longer waiting: {reason}")
    with contextlib.suppress(OSError):
        append_event(paths.events_file, env_steps, rule="wait", value=None, threshold=None,
                     action="ended", message=reason)
    status = read_status(paths.status_file)
    if status is not None:
        status.pop("waiting", None)
        write_status(paths.status_file, status)
