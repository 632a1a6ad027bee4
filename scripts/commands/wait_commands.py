"""`rltrain continue` and `rltrain stop`: answer a run that waits after its pause (--wait).

`continue` checks its changes first, as `rltrain resume --set` would (on the paused
checkpoint, in this process): a change resume would refuse is refused here in one line
with exit code 2, and the run waits on. Both then leave the instruction in the run's
folder and wait until the run has taken it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from rltrain.scripts.commands.run_commands import LOG_DIR_HELP
from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import (
    INSTRUCTION_FILE,
    STATUS_FILE,
    TAKEN_FILE,
    checkpoint_step,
    find_run_log_dir,
)
from rltrain.utils.run.status import effective_state, process_alive, read_status

TIMEOUT_HELP = "Seconds to wait until the run has taken the instruction."


def waiting_run(run: str, log_dir: str) -> tuple[Path, dict[str, Any]]:
    """The run's folder and its status.json "waiting" record; a run that does not wait is
    a UserError saying what it does instead."""
    folder = find_run_log_dir(run, log_dir)
    status = read_status(folder / STATUS_FILE) or {}
    waiting = status.get("waiting")
    if waiting and process_alive(status):
        return folder, {**waiting, "pid": status.get("pid")}
    state = effective_state(status) if status else "not started"
    pause_first = "; `rltrain pause` it first (with --wait it then waits)"
    then = {"running": pause_first, "stuck": pause_first,
            "paused": f"; its process has ended: rltrain resume --checkpoint "
                      f"{status.get('latest_checkpoint')}"}.get(state, "")
    if state == "paused" and status.get("continue_with"):  # a library's run
        then = f"; its library continues it (`rltrain status {run}` shows how)"
    raise UserError(f"run '{run}' is not waiting for an instruction (state: {state}){then}")


def _check_it_was_this_one(folder: Path, request_id: str) -> None:
    """The run took an instruction: refuse (a UserError) if it was another one, given at
    the same time (`rltrain continue` and `rltrain stop` at once both said they were
    obeyed, and the run trained on)."""
    taken = read_status(folder / TAKEN_FILE) or {}  # a JSON object, read as status is
    if taken.get("id") not in (None, request_id):
        then = "continues" if taken.get("action") == "continue" else "stopped waiting"
        raise UserError(f"another instruction given at the same time reached the run "
                        f"first: it {then} (`{taken.get('action')}`); this one was not "
                        "taken")


def _taken(folder: Path, since: float, request_id: str, timeout: float) -> dict[str, Any]:
    """Wait until the run has taken the request: its status.json no longer waits since
    `since`, or names the request as refused (a UserError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(folder / STATUS_FILE) or {}
        waiting = status.get("waiting") or {}
        refused = waiting.get("refused") or {}
        if refused.get("id") == request_id:
            raise UserError(f"refused by the run: {refused.get('message')}; it is still "
                            "waiting")
        if waiting.get("since") != since:
            _check_it_was_this_one(folder, request_id)
            return status
        if not process_alive(status):
            raise UserError("the waiting process ended before it took the instruction")
        time.sleep(0.2)
    raise UserError(f"the run has not taken the instruction within {timeout:g} s; it "
                    f"stays in {folder / INSTRUCTION_FILE}")


@click.command("continue")
@click.argument("run")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Change a config key and continue, as `rltrain resume --set` does.")
@click.option("--log-dir", default="logs", show_default=True, help=LOG_DIR_HELP)
@click.option("--timeout", default=120.0, show_default=True, help=TIMEOUT_HELP)
def continue_command(run: str, overrides: tuple[str, ...], log_dir: str,
                     timeout: float) -> None:
    """Let a run waiting after its pause (--wait) go on, with changes.

    RUN is a run name under --log-dir, or a run folder. The run continues in its own
    process from its paused checkpoint, exactly as `rltrain resume --checkpoint ...
    --set ...` would.
    """
    from rltrain.scripts.training.resume import checked_resume_config  # torch: only when it is used
    from rltrain.scripts.training.wait import write_instruction
    from rltrain.utils.run.device import resolve_device

    folder, waiting = waiting_run(run, log_dir)
    checkpoint = waiting["checkpoint"]
    config = checked_resume_config(load_checkpoint(checkpoint), overrides, checkpoint)
    resolve_device(config.device)  # e.g. --set device=cuda where there is none
    argv = ["rltrain", "continue", run, *(part for o in overrides for part in ("--set", o))]
    request_id = write_instruction(folder / INSTRUCTION_FILE, "continue", overrides, argv)
    _taken(folder, waiting["since"], request_id, timeout)
    changes = ", ".join(overrides) or "no changes"
    # The paused checkpoint's step: by the time the request is taken, the run may have
    # trained on and its status moved past it.
    click.echo(f"run '{folder.name}' continues from step {checkpoint_step(Path(checkpoint))} "
               f"(pid {waiting['pid']}; {changes})")


@click.command()
@click.argument("run")
@click.option("--log-dir", default="logs", show_default=True, help=LOG_DIR_HELP)
@click.option("--timeout", default=60.0, show_default=True, help=TIMEOUT_HELP)
def stop(run: str, log_dir: str, timeout: float) -> None:
    """End a run waiting after its pause (--wait): its process exits with code 3.

    RUN is a run name under --log-dir, or a run folder. The paused checkpoint stays as it
    is, for `rltrain resume` later.
    """
    from rltrain.scripts.training.wait import write_instruction

    folder, waiting = waiting_run(run, log_dir)
    request_id = write_instruction(folder / INSTRUCTION_FILE, "stop")
    _taken(folder, waiting["since"], request_id, timeout)
    click.echo(f"run '{folder.name}' stopped waiting (pid {waiting['pid']} exits with code "
               f"3); resume later with: rltrain resume --checkpoint {waiting['checkpoint']}")
