"""The Click CLI and the training loop: the only layer that wires the others together."""

from __future__ import annotations

import sys


def main() -> None:
    """The `rltrain` command. The CLI is imported in here, not above: importing it loads
    torch and Gymnasium (a second or two), and a Ctrl-C then should end quietly, with
    nothing written yet, not in a traceback from inside an import."""
    try:
        from rltrain.scripts.cli import main as cli_main
    except KeyboardInterrupt:
        print("rltrain: interrupted while starting; nothing was written", file=sys.stderr)
        sys.exit(130)
    cli_main()
