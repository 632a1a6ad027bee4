"""Opening a run's own files: through the run folder only, never through a link in it.

A link planted inside a run folder (`metrics.jsonl -> ~/.bashrc`) would otherwise have
training append to whatever it points at. Files are opened with `O_NOFOLLOW`, so a link
in the last place is refused with an `OutputError` naming the file (exit code 4), and
nothing is written. (Atomic writes, temp file and rename, replace a link rather than
follow it: utils/io/checkpoint.py.)
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO

from rltrain.utils.errors import OutputError

NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 where there is none (Windows)


def open_run_file(path: Path, append: bool = True, binary: bool = False,
                  line_buffered: bool = False) -> IO:
    """`path` opened to append (or to rewrite), refusing a link."""
    flags = os.O_WRONLY | os.O_CREAT | NO_FOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and NO_FOLLOW):
            raise OutputError(f"'{path}' is a link: rltrain writes a run's files only "
                              "inside its folders; remove the link") from None
        raise
    if binary:
        return os.fdopen(fd, "ab" if append else "wb")
    return os.fdopen(fd, "a" if append else "w", encoding="utf-8",
                     buffering=1 if line_buffered else -1)


def write_run_file(path: Path, text: str) -> None:
    """Rewrite `path` with `text`, refusing a link."""
    with open_run_file(path, append=False) as f:
        f.write(text)
