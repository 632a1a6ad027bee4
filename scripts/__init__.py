"""The Click CLI and the training loop: the only layer that wires the others together.

`main` is the `rltrain` command: the process around the CLI (scripts/cli.py, with the
`train`, `resume` and `sweep` commands). Beside it `api.py` is the Python API, and the
rest is laid out by job: `commands/` (the other CLI commands), `training/` (one run: its
agent, state, loop, resume and waiting), `workers/` (env runners on Ray), `verify/`
(`diagnose --verify` and `rltrain.verify`) and `sweep/` (Ray Tune).
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def main() -> None:
    """The `rltrain` command. The CLI is imported in here, not above: importing it loads
    torch and Gymnasium (a second or two), and a Ctrl-C then should end quietly, with
    nothing written yet, not in a traceback from inside an import."""
    _closed_streams_to_devnull()
    try:
        from rltrain.scripts.cli import cli
    except KeyboardInterrupt:
        print("rltrain: interrupted while starting; nothing was written", file=sys.stderr)
        sys.exit(130)
    threading.excepthook = _thread_failed
    try:
        cli(prog_name="rltrain", obj={"owns_process": True})
    except SystemExit:
        # The command has ended and said how; a Ctrl-C while the interpreter shuts down
        # (about a second, with torch and env workers) must not turn that into code 130.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise


def _closed_streams_to_devnull() -> None:
    """Started with stdout or stderr closed (`rltrain train ... >&-`, some daemons),
    Python has None for them: what would be printed there is dropped instead, and the run
    trains as it would with them redirected to /dev/null."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    """A file a background thread writes (TensorBoard's event writer) that cannot be
    written: one line, as in the main thread, not a thread's traceback."""
    from rltrain.utils.errors import describe_os_error

    if args.exc_type is not None and issubclass(args.exc_type, OSError):
        where = args.thread.name if args.thread is not None else "a thread"
        print(f"warning: {describe_os_error(args.exc_value)} (in {where})", file=sys.stderr)
        return
    threading.__excepthook__(args)
