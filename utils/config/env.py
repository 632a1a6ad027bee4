"""Config sections about the env itself: `normalize` (and the checks of `env_kwargs`).

`normalize` is Stable-Baselines3's VecNormalize as a config section (utils/training/normalize.py
does the work); `env_kwargs` is a top-level key of utils/config/schema.py, whose values are
checked here to be plain YAML data, since they go straight to `gymnasium.make`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltrain.utils.config.fields import POSITIVE, opt
from rltrain.utils.errors import ConfigError


@dataclass(frozen=True)
class NormalizeConfig:
    """Running normalisation of what the agent sees, as Stable-Baselines3's VecNormalize:
    statistics updated on training steps only, frozen in evaluation, kept in checkpoints."""

    observations: bool = opt(
        False, "observations become (obs - running mean) / sqrt(running var + epsilon), "
        "clipped to +/- clip: what the agent acts on and what the replay buffer stores")
    rewards: bool = opt(
        False, "rewards stored for learning are divided by the running std of the "
        "discounted return (gamma) and clipped to +/- clip; reported returns stay raw")
    clip: float = opt(10.0, "normalised observations and rewards are clipped to +/- this",
                      POSITIVE)
    epsilon: float = opt(1e-8, "added to the running variance before its square root",
                         POSITIVE)


PLAIN = (str, int, float, bool, type(None))


def check_env_kwargs(key: str, value: Any) -> dict[str, Any]:
    """`value` as env_kwargs: a mapping of names to plain YAML values (numbers, strings,
    booleans, null, and lists or mappings of them)."""
    if not isinstance(value, dict):
        raise ConfigError(f"config key '{key}' must be a mapping of gymnasium.make keyword "
                          f"arguments; got {value!r}")
    for name, item in value.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"config key '{key}' has {name!r}, not a keyword argument name")
        _check_plain(f"{key}.{name}", item)
    return dict(value)


def _check_plain(key: str, value: Any) -> None:
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_plain(f"{key}[{i}]", item)
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_plain(f"{key}.{name}", item)
    elif not isinstance(value, PLAIN):
        raise ConfigError(f"config key '{key}' must be plain YAML data; got "
                          f"{type(value).__name__}")
