"""The one way a run's config is resolved from what a user gives, whoever asks:
`rltrain train` and `config show` (scripts/commands/config_commands.py), `rltrain sweep`'s
trials (scripts/sweep/sweep_plan.py) and the Python API's `rltrain.train`
(scripts/api.py).

What is given (`ConfigRequest`) and the order in which it applies, each later step
overriding the earlier:

1. rltrain's defaults (utils/config/schema.py);
2. without a config file: the shipped `configs/<algo>.yaml` entry for the env, where it
   has one (`--algo`/`--env`, or `algo=`/`env_name=` among the overrides);
3. the config: a YAML file (a path, or a shipped config's name), flat or keyed by env id
   as RL Zoo's `hyperparams/<algo>.yml` are (its section for the env; RL Zoo's key names
   translated), a mapping of the same, or a `TrainConfig`;
4. the overrides, in order: `--set KEY=VALUE` and the everyday flags as their `--set`,
   then the API's keyword arguments (nested mappings or dotted keys), each read back as
   `--set` reads its text.

The result is validated once (utils/config/loader.py), the same for every caller: each
unknown key, wrong type or value out of range, and each override that cannot apply, is
named, all of them in one `ConfigError` (one line each). A caller that runs the env
(not `config show`, which imports no Gymnasium) also has the env id checked
(`check_env`): its problem comes first, an `EnvError` when it is the only one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rltrain.utils.config.loader import checked_config, overridden, resolve_config_path
from rltrain.utils.config.problems import Problems
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.config.zoo import train_mapping
from rltrain.utils.errors import ConfigError, EnvError
from rltrain.utils.io.safe_yaml import load_yaml, read_yaml_mapping

ConfigSource = str | Path | Mapping[str, Any] | TrainConfig


@dataclass(frozen=True)
class ConfigRequest:
    """Everything a user may give for one run's config (see the module's docstring)."""

    config: ConfigSource | None = None
    sets: tuple[str, ...] = ()  # `--set KEY=VALUE` texts, the flags' among them
    keywords: Mapping[str, Any] = field(default_factory=dict)  # the API's overrides
    run_name: str | None = None


# Raises the `EnvError` of an env id that names no env (utils/training/envs.py's
# `check_env_id`, handed in by the callers that import Gymnasium).
EnvCheck = Callable[[str], None]


def resolve_config(request: ConfigRequest, note: Callable[[str], None] = lambda line: None,
                   say_default: bool = True, check_env: EnvCheck | None = None) -> TrainConfig:
    """The validated config of `request`. Which defaults were taken (rltrain's, or a
    shipped per-env entry) is said in one line to `note` (rltrain's own defaults only
    with `say_default`). With `check_env`, the env id is checked first."""
    overrides = (*request.sets, *override_strings(request.keywords))
    try:
        raw, source = _source_mapping(request.config)
        if raw == {} and isinstance(request.config, (str, Path)):
            note(f"config '{source}' is empty: every key takes rltrain's default "
                 "(`rltrain config show` prints them)")
        raw = train_mapping(raw, source, given_value(overrides, "env_name"),
                            given_value(overrides, "algo"), note, say_default)
    except ConfigError as exc:  # no config to check further; the env id still is
        _raise_all(_env_problem(check_env, given_value(overrides, "env_name")), exc.problems)
        raise
    problems = Problems()
    raw = overridden(raw, overrides, problems)
    if request.run_name is not None:
        raw["run_name"] = request.run_name
    config = checked_config(raw, problems)
    if not problems.touch(("env_name",)):  # a wrong env_name is named as such already
        _raise_all(_env_problem(check_env, config.env_name), problems.messages)
    problems.raise_any()
    return config


def _env_problem(check_env: EnvCheck | None, env_name: str | None) -> EnvError | None:
    if check_env is None or env_name is None:
        return None
    try:
        check_env(env_name)
    except EnvError as exc:
        return exc
    return None


def _raise_all(env_problem: EnvError | None, messages: list[str]) -> None:
    """Raises what was found, the env id's problem first: that `EnvError` alone, or one
    `ConfigError` of every message."""
    if env_problem is not None and not messages:
        raise env_problem from None
    if messages:
        first = [str(env_problem)] if env_problem is not None else []
        raise ConfigError(*first, *messages) from None


def _source_mapping(config: ConfigSource | None) -> tuple[dict[str, Any] | None, str | None]:
    """The config's mapping and what to call it in messages (None: no config given)."""
    if config is None:
        return None, None
    if isinstance(config, TrainConfig):
        return config_to_dict(config), "the given TrainConfig"
    if isinstance(config, Mapping):
        return dict(config), "the given mapping"
    if isinstance(config, (str, Path)):
        return read_yaml_mapping(resolve_config_path(str(config))), str(config)
    raise ConfigError(f"config must be a path, a shipped config's name or a mapping, "
                      f"not {type(config).__name__}")


def given_value(overrides: tuple[str, ...], key: str) -> str | None:
    """The last value an override (a flag's or a --set) gives `key`, read as `--set`
    reads it (YAML: quotes and a trailing comment are not part of it)."""
    values = [text for item in overrides
              for name, _, text in [item.partition("=")] if name.strip() == key]
    if not values:
        return None
    try:
        value = load_yaml(values[-1]) if values[-1].strip() else None
    except yaml.YAMLError:
        return values[-1].strip()  # the loader says what is wrong with it
    return None if value is None else str(value)


def override_strings(overrides: Mapping[str, Any], prefix: str = "") -> tuple[str, ...]:
    """`{"td3": {"policy_delay": 3}, "gamma": 0.98}` as `("td3.policy_delay=3",
    "gamma=0.98")`: each value written as the YAML `--set` reads back to it."""
    import yaml

    items: list[str] = []
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            items.extend(override_strings(value, dotted + "."))
            continue
        if isinstance(value, Path):
            value = str(value)
        if isinstance(value, tuple):
            value = list(value)
        try:
            text = yaml.safe_dump(value, default_flow_style=True, width=math.inf)
        except yaml.YAMLError:
            raise ConfigError(f"{dotted}: {type(value).__name__} is not a config value "
                              "(use numbers, strings, booleans, None, lists, dicts)") from None
        items.append(f"{dotted}={text.removesuffix(chr(10)).removesuffix(chr(10) + '...')}")
    return tuple(items)
