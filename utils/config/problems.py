"""A config's problems, collected so that one run of a command names all of them.

Validation (utils/config/loader.py) goes on past a bad key: the key keeps its default
and the message is kept here, with the key it is about. A check that reads a key with a
problem (a section above it, or a key below it) is skipped: `steps: abc` makes the
comparison of learning_starts with max_timesteps meaningless, not a second problem.
At the end every message is raised as one `ConfigError`, one line each, in the order
they were found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from rltrain.utils.errors import ConfigError


class Problems:
    """The messages found so far and the keys they are about."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.keys: set[str] = set()

    def add(self, key: str, message: str) -> None:
        """`message` about `key` (dotted; an item of a list counts as the list)."""
        self.messages.append(message)
        self.keys.add(key.split("[")[0])

    @contextlib.contextmanager
    def about(self, key: str) -> Iterator[None]:
        """Keeps a `ConfigError` raised inside as a problem of `key` instead of raising it."""
        try:
            yield
        except ConfigError as exc:
            for message in exc.problems:
                self.add(key, message)

    def touch(self, keys: Iterable[str]) -> bool:
        """Whether a problem was found in any of `keys`, a section above one or a key in it."""
        return any(bad in ("", key) or bad.startswith(key + ".") or key.startswith(bad + ".")
                   for bad in self.keys for key in keys)  # "": the config's top level

    def raise_any(self) -> None:
        """Raises every problem found as one `ConfigError` (nothing if none was)."""
        if self.messages:
            raise ConfigError(*self.messages)
