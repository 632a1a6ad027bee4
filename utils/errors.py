"""Errors a user can act on.

Anything raised as `UserError` is a mistake in the user's input (config, file, env id,
checkpoint): the CLI prints its message as one line and exits with code 2, no traceback.
A file that cannot be written (disk full, no permission) is an `OutputError`: not the
user's input and not a bug; the CLI prints it as one line and exits with code 4. An
exception raised by the env's own code is an `EnvFailure`: one line, exit code 5.
Internal invariants use `assert`; anything else is a bug and keeps its traceback.
"""


import os
import unicodedata


class UserError(Exception):
    """A problem with the user's input, described in one actionable line."""


class ConfigError(UserError):
    """An invalid config file, key or value; or several, one message a line, so that one
    run of a command names every problem of a config (utils/config/loader.py)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))

    @property
    def problems(self) -> list[str]:
        """Each problem's message, in the order they were found."""
        return str(self).splitlines()


class CheckpointError(UserError):
    """A checkpoint file that is missing, unreadable, unsafe or does not fit the env."""


class EnvError(UserError):
    """An environment id that does not exist or an env rltrain cannot train on."""


class OutputError(Exception):
    """A file rltrain had to write could not be written (disk full, no permission, a
    path that is not a folder)."""


class EnvFailure(Exception):
    """The env's own code raised an exception (in reset or step): not a bug of rltrain's.
    The message names the exception and where it was raised; `details` holds the
    traceback, which training writes to the run's log folder. `rule` names the stop in
    events.jsonl; `fixed` says what must hold before the run is resumed."""

    rule = "env_error"
    fixed = "the env is fixed"

    def __init__(self, message: "str | EnvFailure", details: str = "") -> None:
        # An async vector env hands a worker's exception back as `type(exc)(exc)`.
        if isinstance(message, EnvFailure):
            message, details = str(message), details or message.details
        super().__init__(message)
        self.details = details


def first_line(exc: BaseException) -> str:
    """An exception's message, its first line only ("" when it has none), printable:
    an env's or a library's text goes into one-line messages, events.jsonl and
    status.json, which terminals show."""
    return printable((str(exc).strip().splitlines() or [""])[0])


def printable(text: str) -> str:
    """`text` with every control character but newline and tab written as its escape
    (`\\x1b`): a terminal shows it instead of obeying it (clearing the screen, moving
    the cursor, setting the window title)."""
    return "".join(c if c in "\n\t" or unicodedata.category(c) != "Cc"
                   else c.encode("unicode_escape").decode("ascii") for c in text)


def os_error_in(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` (itself, or what it was raised from or during), if any:
    torch.save, for one, reports a full disk as a RuntimeError raised during an OSError."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def describe_os_error(exc: OSError) -> str:
    """`No space left on device: 'path'`, or as close as the error allows."""
    name = os.fsdecode(exc.filename) if isinstance(exc.filename, (bytes, str)) else exc.filename
    where = f": '{name}'" if name else ""
    return f"{exc.strerror or exc}{where}"


def describe_write_failure(exc: BaseException) -> str:
    """What could not be written, in one line: an `OutputError`'s message, or the OSError
    behind `exc`."""
    if isinstance(exc, OutputError):
        return str(exc)
    cause = os_error_in(exc)
    return describe_os_error(cause) if cause is not None else str(exc)


class Aborted(KeyboardInterrupt):
    """The second Ctrl-C: abort at once (utils/run/signals.py). A KeyboardInterrupt that
    is not one was raised by something else, such as an env's own code."""
