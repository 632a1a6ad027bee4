"""`rltrain status` and `pause`: look at and steer a run from another terminal.

Both work from the run's files only (status.json, events.jsonl, the checkpoint folder),
so `status` answers for live and finished runs alike. `pause` is an instruction from
outside the training: it leaves a request file in the run folder, which the training
loop picks up at its next env step (a watched library's loop: at its next safe point)
and turns into an ordinary pause.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import click

from rltrain.utils.errors import UserError, printable
from rltrain.utils.io.checkpoint import atomic_write, to_json
from rltrain.utils.run.folders import (
    EVENTS_FILE,
    PAUSE_REQUEST_FILE,
    STATUS_FILE,
    STEP_CHECKPOINT,
    find_run_log_dir,
)
from rltrain.utils.run.log_files import read_jsonl, unreadable_note
from rltrain.utils.run.status import LIVE_STATES, effective_state, process_alive, read_status

LOG_DIR_HELP = "Where run folders live, when RUN is a name (default: logs)."


def _load_status(log_dir: Path) -> dict[str, Any]:
    path = log_dir / STATUS_FILE
    status = read_status(path)
    if status is None and path.exists():
        raise UserError(f"'{path}' cannot be read as JSON (edited or damaged?); the run's "
                        "checkpoints and logs are not affected")
    if status is None:
        raise UserError(f"run folder '{log_dir}' has no status.json yet: the run has not "
                        "started training (or is still starting: try again in a few seconds)")
    return status


def last_pause(log_dir: Path) -> str | None:
    """The reason of the newest pause recorded in events.jsonl (status.json holds it only
    while the run is paused; this also names the pause a resumed run came from)."""
    events = read_jsonl(log_dir / EVENTS_FILE)
    pauses = [e for e in events
              if e.get("action") in ("pause", "stop")]  # "stop": a write failure, no checkpoint
    if not pauses:
        return None
    event = pauses[-1]
    # Several rules may ask for one pause; the "paused" line names the one it was for.
    done = [e for e in events if e.get("action") == "paused"]
    if done and done[-1].get("env_steps") == event.get("env_steps"):
        event = next((e for e in reversed(pauses) if e.get("rule") == done[-1].get("rule")
                      and e.get("env_steps") == event.get("env_steps")), event)
    return f"[{event.get('rule')}] {event.get('message')} (step {event.get('env_steps')})"


def _left_out(non_finite_rewards: int) -> str:
    return (f" ({non_finite_rewards} NaN/inf rewards left out)" if non_finite_rewards
            else "")


def newest_checkpoint(named: str | None) -> str | None:
    """The checkpoint status.json names, or a newer step checkpoint beside it: a process
    killed (kill -9) between writing a checkpoint and writing its status leaves the
    status one checkpoint behind."""
    if not named:
        return named
    path = Path(named)
    match = STEP_CHECKPOINT.match(path.name)
    step = int(match.group(1)) if match else -1
    try:
        beside = [(int(m.group(1)), p) for p in path.parent.iterdir()
                  if (m := STEP_CHECKPOINT.match(p.name)) and p.is_file()]
    except OSError:
        return named
    newest = max(beside, default=None)
    return str(path.parent / newest[1].name) if newest and newest[0] > step else named


def status_report(log_dir: Path) -> dict[str, Any]:
    status = _load_status(log_dir)
    state = effective_state(status)
    best_step, steps = status.get("best_eval_step"), status.get("env_steps", 0)
    # A paused run whose process waits for `rltrain continue` or `stop` (--wait).
    waiting = (status["waiting"] if state == "paused" and status.get("waiting")
               and process_alive(status) else None)
    return {
        "run": status.get("run"), "log_dir": str(log_dir), "state": state,
        "pid": status.get("pid") if state in LIVE_STATES or waiting else None,
        "env_steps": steps, "max_timesteps": status.get("max_timesteps"),
        "episodes": status.get("episodes"), "updates": status.get("updates"),
        "latest_episode_return": status.get("latest_episode_return"),
        "latest_episode_non_finite_rewards": status.get("latest_episode_non_finite_rewards", 0),
        "latest_eval": status.get("latest_eval"), "best_eval": status.get("best_eval"),
        "best_eval_step": best_step, "evals_since_best": status.get("evals_since_best"),
        "steps_since_best": None if best_step is None else steps - best_step,
        "paused": state == "paused", "last_pause_reason": last_pause(log_dir),
        "latest_checkpoint": newest_checkpoint(status.get("latest_checkpoint")),
        "updated_at": status.get("updated_at"),
        "waiting": waiting,
        "stuck": status.get("stuck") if state == "stuck" else None,
        # a library's paused run: the lines of its own API that continue it
        "continue_with": status.get("continue_with") if state == "paused" else None,
        "workers": status.get("workers"),  # num_workers: the env runners' figures
    }


def _say_paused(status: dict[str, Any]) -> None:
    """Where the paused run is and what continues it: `rltrain continue` while its
    process waits (--wait), else `rltrain resume`."""
    checkpoint = status.get("latest_checkpoint")
    click.echo(f"paused at step {status.get('env_steps')}; checkpoint: {checkpoint}")
    if status.get("continue_with"):  # a library's run: its own API continues it
        click.echo(status["continue_with"])
    elif status.get("waiting") and process_alive(status):
        run = status.get("run")
        click.echo(f"the run waits: rltrain continue {run} [--set KEY=VALUE ...], or "
                   f"rltrain stop {run}")
    else:
        click.echo(f"resume with: rltrain resume --checkpoint {checkpoint}")


def _interrupt_stuck(status: dict[str, Any]) -> None:
    """The run is inside one env call for long and reads no request: a SIGTERM makes it
    abandon the call and stop with a checkpoint (exit code 5, as an env failure)."""
    if not process_alive(status):  # ended meanwhile: its id may be another's by now
        return
    stuck = status.get("stuck") or {}
    click.echo(f"the run is stuck in the env's {stuck.get('call', 'code')} (for "
               f"{stuck.get('seconds', '?')} s when last recorded): sending it SIGTERM")
    with contextlib.suppress(OSError, ValueError, TypeError):
        os.kill(int(status["pid"]), signal.SIGTERM)


@click.command()
@click.argument("run")
@click.option("--log-dir", default="logs", show_default=True, help=LOG_DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status(run: str, log_dir: str, as_json: bool) -> None:
    """Show a run's status (live or not): steps, evaluations, pause reason, checkpoint.

    RUN is a run name under --log-dir, or a run folder.
    """
    folder = find_run_log_dir(run, log_dir)
    report = status_report(folder)
    note = unreadable_note(folder)
    if note is not None:  # damaged lines, wrong types, stray files: read around
        click.echo(note, err=True)
    if as_json:
        click.echo(to_json(report))
        return
    state = report["state"] + (f" (pid {report['pid']})" if report["pid"] else "")
    if report["waiting"]:
        state = "paused" + _waiting(report["waiting"], report["pid"])
    if report["stuck"]:
        state += (f": inside the env's {report['stuck'].get('call')} for "
                  f"{report['stuck'].get('seconds')} s or more (env_step_timeout ends it; "
                  f"`rltrain pause` abandons the call)")
    if report["state"] == "stopped":
        state += ": the process ended without a clean stop (killed?); resume from the " \
                 "latest checkpoint"
    from rich.console import Console  # rich is imported when a table is printed
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None)
    rows = [("run", f"{report['run']}  ({report['log_dir']})"), ("state", state),
            ("env steps", f"{report['env_steps']} / {report['max_timesteps']}"),
            ("episodes", report["episodes"]), ("updates", report["updates"]),
            ("latest episode return", _num(report["latest_episode_return"]) + _left_out(
                report["latest_episode_non_finite_rewards"])),
            ("latest eval", _num(report["latest_eval"])),
            ("best eval", "n/a" if report["best_eval"] is None else
             f"{_num(report['best_eval'])} at step {report['best_eval_step']}"),
            ("since best", "n/a" if report["best_eval"] is None else
             f"{report['evals_since_best']} evaluations ({report['steps_since_best']} env "
             "steps)"),
            ("last pause", report["last_pause_reason"] or "none"),
            ("latest checkpoint", report["latest_checkpoint"] or "none")]
    if report["continue_with"]:
        rows.append(("continue with", report["continue_with"].strip()))
    if report["workers"]:
        rows += _worker_rows(report["workers"])
    for key, value in rows:
        # Text: no rich markup in messages; printable: no terminal controls from a file;
        # a word wider than the terminal (a file's path) folds onto the next line, whole
        table.add_row(key, Text(printable(str(value)), overflow="fold"))
    Console(soft_wrap=True).print(table)


def _worker_rows(workers: dict[str, Any]) -> list[tuple[str, str]]:
    """The env runners' lines of `rltrain status` (num_workers)."""
    rows = [("workers", f"{len(workers.get('runners', []))} env runners, "
             f"{workers.get('mode')}; learner {workers.get('learner_updates_per_s')} "
             f"updates/s, waiting for chunks {workers.get('learner_waiting_percent')}% of "
             f"the time, {workers.get('queue_transitions')} transitions queued")]
    for runner in workers.get("runners", []):
        rows.append((f"  runner {runner.get('runner')}",
                     f"{runner.get('env_steps_per_s')} env steps/s, "
                     f"{runner.get('cpu_percent')}% CPU, {runner.get('idle_percent')}% idle "
                     f"(waiting for the learner), {runner.get('memory_mb')} MB, "
                     f"{runner.get('env_steps')} env steps, {runner.get('restarts')} restarts"))
    return rows


def _waiting(waiting: dict[str, Any], pid: Any) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(waiting["since"]))
    until = waiting.get("until")
    ends = ("" if until is None else
            f", until {time.strftime('%H:%M:%S', time.localtime(until))} (then it exits)")
    answers = " or ".join(f"`{c}`" for c in waiting.get("answer_with", []))
    return f", waiting for instruction since {since} (pid {pid}{ends}): {answers}"


def _num(value: float | str | None) -> str:
    """A number for the table; status.json holds NaN/inf as the strings "nan"/"inf"."""
    if value is None:
        return "n/a"
    return value if isinstance(value, str) else f"{value:.2f}"


@click.command()
@click.argument("run")
@click.option("--log-dir", default="logs", show_default=True, help=LOG_DIR_HELP)
@click.option("--reason", default="pause requested by `rltrain pause`",
              help="Recorded as the pause reason.")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the run has written its paused checkpoint.")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait.")
def pause(run: str, log_dir: str, reason: str, wait: bool, timeout: float) -> None:
    """Ask a running training to pause at its next env step (a watched library's loop:
    its next safe point), with a resumable checkpoint.

    RUN is a run name under --log-dir, or a run folder.
    """
    folder = find_run_log_dir(run, log_dir)
    before = _load_status(folder)
    state = effective_state(before)
    # Paused, its process still alive: another request (or a rule) paused it just now, and
    # it waits (--wait) or is ending. This request is answered as that one is.
    just_paused = state == "paused" and process_alive(before)
    if state not in LIVE_STATES and not just_paused:
        raise UserError(f"run '{run}' is not running (state: {state}); nothing to pause")
    request = folder / PAUSE_REQUEST_FILE
    if not just_paused:
        atomic_write(request, lambda f: f.write(reason.encode()), durable=False)
        click.echo(f"pause requested for run '{before.get('run')}' (pid {before.get('pid')})")
    if state == "stuck":  # it cannot read the request: SIGTERM abandons the env call
        _interrupt_stuck(before)
    if not wait:
        return
    deadline = time.monotonic() + timeout
    settled: float | None = None  # when it is paused, its process is about to wait or end
    while time.monotonic() < deadline:
        now = read_status(folder / STATUS_FILE) or {}
        state = effective_state(now) if now else "unknown"
        if state == "paused":
            settled = settled or time.monotonic() + 10
            if now.get("waiting") or not process_alive(now) or time.monotonic() > settled:
                _say_paused(now)
                return
            time.sleep(0.05)
            continue
        if state == "finished":  # the request came on the last step
            click.echo(f"the run finished at step {now.get('env_steps')} instead; checkpoint: "
                       f"{now.get('latest_checkpoint')}")
            return
        if state == "stuck" and before.get("state") != "stuck":  # it got stuck meanwhile
            before = now
            _interrupt_stuck(now)
        elif state not in LIVE_STATES:
            raise UserError(f"run '{run}' stopped without pausing (state: {state}): "
                            f"{now.get('pause_reason') or 'no reason recorded'}")
        time.sleep(0.2)
    click.echo(f"the run has not paused within {timeout:g} s; the request stays in {request}")
