"""The building blocks of the config schema: a field with its help and allowed range
(`opt`), and the shape every rule's config has (`RuleConfig`). utils/config/schema.py builds the
schema from them, and so do the rules declared in utils/diagnosis/rules/."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Range:
    """An allowed numeric interval; `None` leaves that side open-ended."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{left}{self.low:g}, {self.high:g}{right}"


POSITIVE = Range(0, None, low_open=True)
NON_NEGATIVE = Range(0, None)
AT_LEAST_ONE = Range(1, None)
UNIT_INTERVAL = Range(0, 1, low_open=True)  # (0, 1]


def opt(default: Any, help: str, valid: Range | None = None) -> Any:
    """A config field: its default, its `--help` and docs text and its allowed range."""
    meta = {"help": help, "range": valid}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


RuleAction = Literal["warn", "pause", "off"]


@dataclass(frozen=True)
class RuleConfig:
    """Every health and diagnostic rule has this shape: a threshold and an action."""

    threshold: float | None = opt(None, "the rule fires beyond this value (see the rule reference)")
    action: RuleAction = opt("pause", "warn, pause (a warning when safe_mode is false) or off")


def rules_of(section: Any) -> dict[str, RuleConfig]:
    """The rules of a config section (`monitor` or `diagnostics`), by name."""
    return {f.name: rule for f in dataclasses.fields(section)
            if isinstance(rule := getattr(section, f.name), RuleConfig)}


# The keys `rltrain resume --set` cannot change: the networks, the replay buffer and the
# episodes a checkpoint holds depend on them.
FIXED_ON_RESUME = ("env_name", "env_kwargs", "eval_env_kwargs", "seed", "algo", "hidden_sizes",
                   "networks", "replay_buffer_size", "num_envs", "normalize",
                   "diagnostics.max_samples")

# The keys that run a command, send data somewhere or name a folder to write. They are
# never taken from a file rltrain did not just get from the user (a checkpoint, a run
# folder): a resume takes them from its own --set, else their defaults
# (docs/robustness.md, "What is trusted from which file").
FOLDER_KEYS = ("log_dir", "checkpoint_dir")
COMMAND_KEYS = ("notify.url", "notify.command", "ray_address")  # default: none
NOT_FROM_FILES = FOLDER_KEYS + COMMAND_KEYS
