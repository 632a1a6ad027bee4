"""Errors a user can act on.

Anything raised as `UserError` is a mistake in the user's input (config, file, env id,
checkpoint): the CLI prints its message as one line and exits with code 2, no traceback.
Internal invariants use `assert`; anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A problem with the user's input, described in one actionable line."""


class ConfigError(UserError):
    """An invalid config file, key or value."""


class CheckpointError(UserError):
    """A checkpoint file that is missing, unreadable, unsafe or does not fit the env."""


class EnvError(UserError):
    """An environment id that does not exist or an env rltrain cannot train on."""
