"""Load, override and validate configs: YAML file -> `--set` overrides -> `TrainConfig`.

Config files and `--set key=value` values are read by utils/io/safe_yaml.py (PyYAML's
SafeLoader, never `eval`, with bounded size, depth and alias expansion).
Validation happens once, here: unknown keys fail with a "did you mean", types and
ranges are checked per field, and cross-field rules at the end. Every failure is a
`ConfigError` whose message names the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from rltrain.agents.registry import ALGORITHMS, algorithm
from rltrain.utils.config.aliases import alias_hint
from rltrain.utils.config.env import check_env_kwargs
from rltrain.utils.config.fields import Range, rules_of
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.safe_yaml import ConfigTooLarge, read_yaml_mapping
from rltrain.utils.io.safe_yaml import load_yaml as _load_yaml
from rltrain.utils.rules.registry import spec
from rltrain.utils.run.notify_target import check_notify

SHIPPED_CONFIGS = "rltrain.configs"


def shipped_config_names() -> list[str]:
    """Names of the YAML configs installed with rltrain."""
    folder = resources.files(SHIPPED_CONFIGS)
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".yaml", ".yml")))


def resolve_config_path(name: str) -> Path:
    """A path that exists wins; otherwise a bare name is looked up in the shipped configs."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        raise ConfigError(f"config '{name}' is a folder, not a YAML file")
    if path.exists():  # a device, a pipe, a socket: nothing a config is read from
        raise ConfigError(f"config '{name}' is not a regular file (a device or a pipe), "
                          "not a YAML file")
    shipped = shipped_config_names()
    if path.name == name:  # a bare name, no folder part
        for candidate in (name, name + ".yaml", name + ".yml"):
            if candidate in shipped:
                return Path(str(resources.files(SHIPPED_CONFIGS).joinpath(candidate)))
    raise ConfigError(f"config file '{name}' not found (not a file, and not a shipped config: "
                      f"{', '.join(shipped)})")


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...],
                    option: str = "--set") -> dict[str, Any]:
    """Apply `key=value` strings (dotted keys for nested sections) to a copy of `raw`;
    `option` is what errors call them (`rltrain sweep --grid` points are overrides too)."""
    result = _deep_copy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{option} expects key=value, got '{item}'")
        try:
            value = _load_yaml(text) if text.strip() else None
        except ConfigTooLarge as exc:
            raise ConfigError(f"{option} {key}: value refused: {exc}") from None
        except yaml.YAMLError:
            raise ConfigError(f"{option} {key}: cannot parse value '{text}' as YAML") from None
        node = result
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{option} {key}: '{'.'.join(parts[:depth + 1])}' "
                                  "is not a section")
            node = child
        node[parts[-1]] = value
    return result


def load_config(name: str, overrides: list[str] | tuple[str, ...] = (),
                run_name: str | None = None) -> TrainConfig:
    """The validated config from a file (path or shipped name) plus `--set` overrides."""
    raw = read_yaml_mapping(resolve_config_path(name))
    raw = apply_overrides(raw, overrides)
    if run_name is not None:
        raw["run_name"] = run_name
    return config_from_dict(raw)


def config_from_dict(raw: dict[str, Any]) -> TrainConfig:
    """Validate a plain mapping (from YAML or a checkpoint) into a `TrainConfig`."""
    config = _build(TrainConfig(), raw, prefix="")
    _check_cross_field(config, raw)
    return _off_rules_keep_their_default(config)


def _off_rules_keep_their_default(config: TrainConfig) -> TrainConfig:
    """A rule that is off and given no threshold keeps its default one: nothing fires, and
    every check can still compare with a number (null would fail there, mid-run)."""
    sections = {}
    for name in ("monitor", "diagnostics"):
        section = getattr(config, name)
        defaults = rules_of(type(section)())
        filled = {rule_name: dataclasses.replace(rule, threshold=defaults[rule_name].threshold)
                  for rule_name, rule in rules_of(section).items()
                  if rule.action == "off" and rule.threshold is None}
        if filled:
            sections[name] = dataclasses.replace(section, **filled)
    return dataclasses.replace(config, **sections)


def _build(default: Any, raw: Any, prefix: str) -> Any:
    """`default` (a config section instance) with the keys given in `raw` replaced."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config section '{prefix.rstrip('.')}' must be a mapping, "
                          f"got {_show(raw)}")
    fields = {f.name: f for f in dataclasses.fields(default)}
    hints = typing.get_type_hints(type(default))
    for key in raw:
        if key not in fields:
            raise ConfigError(_unknown_key_message(prefix, str(key), list(fields)))
    values = {}
    for name, value in raw.items():
        key, current = prefix + name, getattr(default, name)
        if dataclasses.is_dataclass(current):
            values[name] = _build(current, value, prefix=key + ".")
        elif typing.get_origin(hints[name]) is dict:  # env_kwargs: plain data for the env
            values[name] = check_env_kwargs(key, value)
        else:
            values[name] = _convert(key, value, hints[name], fields[name].metadata.get("range"))
    return dataclasses.replace(default, **values)


def _unknown_key_message(prefix: str, key: str, valid: list[str]) -> str:
    alias = alias_hint(key) if not prefix else None  # another tool's name comes first
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = alias or (f"; did you mean '{prefix}{close[0]}'?" if close else "")
    section = f" in section '{prefix.rstrip('.')}'" if prefix else ""
    return f"unknown config key '{prefix}{key}'{section}{hint}"


def _convert(key: str, value: Any, hint: Any, valid: Range | None) -> Any:
    """Check `value` against the type hint and range; return it in its canonical type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return None if value is None else _convert(key, value, _member(value, args), valid)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"config key '{key}' must be one of {', '.join(map(str, args))}; "
                              f"got {_show(value)}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or not value:
            raise ConfigError(f"config key '{key}' must be a non-empty list; got {_show(value)}")
        return tuple(_convert(f"{key}[{i}]", v, args[0], valid) for i, v in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key '{key}' must be true or false; got {_show(value)}")
        return value
    if hint is str:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"config key '{key}' must be a non-empty string; got {_show(value)}")
        return value
    assert hint in (int, float), f"unsupported type {hint} for {key}"
    number = _as_number(key, value, integer=hint is int, valid=valid)
    if valid is not None and not valid.contains(number):
        raise ConfigError(f"config key '{key}' must be {_describe(hint, valid)}; got {value!r}")
    return number


def _member(value: Any, args: tuple[Any, ...]) -> Any:
    """The type of a union (`float | None`, or a word or a number such as sac.ent_coef's
    `str | float`) that `value` is checked as."""
    inner = [a for a in args if a is not type(None)]
    if len(inner) == 1:
        return inner[0]
    assert set(inner) <= {str, int, float}, f"unsupported union {args}"
    if isinstance(value, str):
        return str
    return float if float in inner else int


def _as_number(key: str, value: Any, integer: bool, valid: Range | None) -> int | float:
    """A number (`1e6` is one: utils/io/safe_yaml.py). A number given as text (quoted:
    "0.99") is refused with the unquoted form, as a config's types are strict."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    kind = "an integer" if integer else "a number"
    if valid is not None:
        kind = _describe(int if integer else float, valid)
    if isinstance(value, str) and _is_number_text(value):
        raise ConfigError(f"config key '{key}' must be {kind}; got the text {value!r}: "
                          f"write it without quotes ({key}: {value.strip()})")
    if integer and isinstance(number, int):  # exact: a float holds ints only up to 2**53
        return _int64(key, number)
    if number is None or not _finite(number):
        raise ConfigError(f"config key '{key}' must be {kind}; got {_show(value)}")
    if integer:
        if float(number) != int(number):
            raise ConfigError(f"config key '{key}' must be {kind}; got {_show(value)}")
        return _int64(key, int(number))
    return float(number)


def _is_number_text(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def _int64(key: str, number: int) -> int:
    if not -2**63 <= number < 2**63:  # torch and NumPy count steps in int64
        raise ConfigError(f"config key '{key}' must be an integer below 2**63; got {number}")
    return number


def _finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int beyond any float
        return False


def _describe(hint: type, valid: Range) -> str:
    noun = "an integer" if hint is int else "a number"
    text = str(valid)
    return f"{noun} {text}" if text[0] in "<>" else f"{noun} in {text}"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    return f"{value!r} ({type(value).__name__})"


def _check_cross_field(config: TrainConfig, raw: dict[str, Any]) -> None:
    if config.batch_size > config.replay_buffer_size:
        raise ConfigError(f"config key 'batch_size' ({config.batch_size}) must not exceed "
                          f"replay_buffer_size ({config.replay_buffer_size})")
    if config.learning_starts >= config.max_timesteps:
        raise ConfigError(f"config key 'learning_starts' ({config.learning_starts}) must be "
                          f"below max_timesteps ({config.max_timesteps}): no update would run")
    for entry in ALGORITHMS.values():
        if entry.section in raw and config.algo != entry.name:
            raise ConfigError(f"config section '{entry.section}' applies only with algo: "
                              f"{entry.name} (algo is {config.algo})")
    _check_action_noise(config)
    if config.noise_decay_steps is not None and config.exploration_noise_final is None:
        raise ConfigError("config key 'noise_decay_steps' needs exploration_noise_final "
                          "(the std to decay to)")
    for section in ("monitor", "diagnostics"):
        _check_rule_thresholds(section, getattr(config, section))
    bounds = config.monitor.state_bounds
    if bounds.low is not None and bounds.high is not None and len(bounds.low) != len(bounds.high):
        raise ConfigError("config keys 'monitor.state_bounds.low' and '.high' must have the "
                          "same length")
    check_notify(config.notify)
    _check_workers(config)
    if config.run_name is not None and not _safe_name(config.run_name):
        raise ConfigError(f"config key 'run_name' must be a plain folder name (letters, digits, "
                          f"'-', '_', '.'); got {config.run_name!r}")


def _check_workers(config: TrainConfig) -> None:
    """Env runners keep no shared running statistics: each would normalise with its own."""
    normalized = config.normalize.observations or config.normalize.rewards
    if config.num_workers and normalized:
        raise ConfigError("config key 'num_workers' cannot be combined with normalize.* yet "
                          "(each runner would normalise with its own statistics); use "
                          "num_workers: 0, or turn normalize off")


NOISE_KEYS = ("exploration_noise", "noise_type", "ou_theta", "exploration_noise_final",
              "noise_decay_steps")


def _check_action_noise(config: TrainConfig) -> None:
    """Action-noise keys set away from their defaults for an algorithm that adds no noise
    (SAC samples its policy): refused, as they would silently change nothing."""
    if algorithm(config.algo).adds_action_noise:
        return
    default = TrainConfig()
    changed = [k for k in NOISE_KEYS if getattr(config, k) != getattr(default, k)]
    if changed:
        raise ConfigError(f"config key '{changed[0]}' sets action noise, which algo "
                          f"{config.algo} does not add: it explores by sampling its policy "
                          f"(see the config's '{config.algo}' section)")


def _check_rule_thresholds(name: str, section: Any) -> None:
    """A rule whose default has no threshold cannot be given one; any other rule that is
    not off needs a number > 0 (null would only fail later, mid-run)."""
    defaults = rules_of(type(section)())
    for rule_name, rule in rules_of(section).items():
        key = f"{name}.{rule_name}.threshold"
        if defaults[rule_name].threshold is None:
            if rule.threshold is not None:
                raise ConfigError(f"config key '{key}' cannot be set; its threshold is "
                                  f"{spec(rule_name).fixed_threshold}")
        elif rule.action != "off" and (rule.threshold is None or rule.threshold <= 0):
            raise ConfigError(f"config key '{key}' must be a number > 0 "
                              f"(or set {name}.{rule_name}.action: off)")


def _safe_name(name: str) -> bool:
    return (name not in (".", "..") and
            all(c.isalnum() or c in "-_." for c in name))


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
