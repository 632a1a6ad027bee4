"""Every algorithm rltrain trains, one entry each: its name, a line that says what it is,
its own config options, and the module that implements it.

This module imports neither torch nor the algorithms' modules: the config schema (the
`algo` choices and one option section per algorithm) is built from it by commands that
must start quickly. A run loads the module's `IMPLEMENTATION` (agents/base.py) when it
builds the agent.

Adding an algorithm: its module in `agents/` (the agent and `IMPLEMENTATION`), its
entry below (with its options dataclass, if it has options), and its configs.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any


def option(default: Any, help: str, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> Any:
    """A field of an algorithm's options: its default, its help (the config reference's
    text) and its allowed interval, which the config turns into its own range check."""
    return field(default=default, metadata={"help": help, "bounds": (low, high, low_open)})


@dataclass(frozen=True)
class Algorithm:
    """One algorithm's entry."""

    name: str      # the config's `algo` value
    summary: str   # what it is, in a few words (`--help`, the config reference)
    module: str    # the module whose `IMPLEMENTATION` builds its agent
    # Its own config section (`td3:`, `sac:`), a frozen dataclass of `option` fields;
    # None: it has none.
    options: type | None = None
    # Explores with the config's action noise (exploration_noise, noise_type, ...) added
    # to a deterministic policy; False: by sampling its own policy.
    adds_action_noise: bool = True

    @property
    def section(self) -> str | None:
        return self.name if self.options is not None else None

    def implementation(self) -> Any:
        """The module's `IMPLEMENTATION` (imports torch)."""
        return importlib.import_module(self.module).IMPLEMENTATION

    def options_from(self, values: dict[str, Any] | None) -> Any:
        """The options dataclass from a mapping of its fields (None: the defaults)."""
        if self.options is None:
            return None
        known = {f.name for f in dataclasses.fields(self.options)}
        return self.options(**{k: v for k, v in (values or {}).items() if k in known})


@dataclass(frozen=True)
class TD3Options:
    """Fujimoto et al., 2018: delayed actor updates and target policy smoothing."""

    policy_delay: int = option(
        2, "actor and target updates happen every this many critic updates", low=1)
    target_policy_noise: float = option(
        0.2, "std of the target policy smoothing noise, relative to the action half-range",
        low=0)
    target_noise_clip: float = option(
        0.5, "the smoothing noise is clipped to +/- this, relative to the action half-range",
        low=0)


@dataclass(frozen=True)
class SACOptions:
    """Haarnoja et al., 2018: the entropy temperature (as Stable-Baselines3 names it)."""

    ent_coef: str | float = option(
        "auto", "entropy temperature alpha: auto (learnt, starting at 1), auto_<start> "
        "(learnt, starting at <start>, e.g. auto_0.1), or a fixed positive number", low=0,
        low_open=True)
    target_entropy: str | float = option(
        "auto", "the policy entropy the learnt temperature aims at: auto (-dim(action)) or a "
        "number")
    target_update_interval: int = option(
        1, "updates between Polyak updates of the target critic", low=1)


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ddpg", "deterministic policy, explores with action noise", "rltrain.agents.ddpg"),
    Algorithm("td3", "delayed actor, smoothed targets", "rltrain.agents.td3", TD3Options),
    Algorithm("sac", "stochastic policy, explores by its entropy (soft actor-critic)",
              "rltrain.agents.sac", SACOptions, adds_action_noise=False),
)}


def algorithm(name: str) -> Algorithm:
    """The entry of `name`; a ValueError naming the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algo {name!r}; one of {', '.join(ALGORITHMS)}") from None
