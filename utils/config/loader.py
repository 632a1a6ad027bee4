"""Load, override and validate configs: YAML file -> `--set` overrides -> `TrainConfig`.

Config files and `--set key=value` values are read by utils/io/safe_yaml.py (PyYAML's
SafeLoader, never `eval`, with bounded size, depth and alias expansion).
Validation happens once, here: unknown keys fail with a "did you mean", types and
ranges are checked per field, and the checks across keys at the end
(utils/config/cross_checks.py). Every problem's message names the key and what is
allowed; validation goes on past one (utils/config/problems.py), and all of them are
raised together as one `ConfigError`, one line each.
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

from rltrain.utils.config.aliases import alias_hint
from rltrain.utils.config.cross_checks import check_cross_field
from rltrain.utils.config.env import check_env_kwargs
from rltrain.utils.config.fields import Range, rules_of
from rltrain.utils.config.problems import Problems
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.safe_yaml import ConfigTooLarge, read_yaml_mapping
from rltrain.utils.io.safe_yaml import load_yaml as _load_yaml

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
    `option` is what errors call them (`rltrain sweep --grid` points are overrides too).
    Every override that cannot apply is named, in one `ConfigError`."""
    problems = Problems()
    result = overridden(raw, overrides, problems, option)
    problems.raise_any()
    return result


def overridden(raw: dict[str, Any], overrides: list[str] | tuple[str, ...],
               problems: Problems, option: str = "--set") -> dict[str, Any]:
    """A copy of `raw` with each override that applies applied; each one that cannot (not
    key=value, not YAML, into a key that is no section) is a problem of its key."""
    result = _deep_copy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.add(key, f"{option} expects key=value, got '{item}'")
            continue
        with problems.about(key):
            _put(result, key, _override_value(key, text, option), option)
    return result


def _override_value(key: str, text: str, option: str) -> Any:
    try:
        return _load_yaml(text) if text.strip() else None
    except ConfigTooLarge as exc:
        raise ConfigError(f"{option} {key}: value refused: {exc}") from None
    except yaml.YAMLError:
        raise ConfigError(f"{option} {key}: cannot parse value '{text}' as YAML") from None


def _put(result: dict[str, Any], key: str, value: Any, option: str) -> None:
    """`result[a][b][c] = value` for the dotted key `a.b.c`, making the sections needed."""
    node = result
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{option} {key}: '{'.'.join(parts[:depth + 1])}' "
                              "is not a section")
        node = child
    node[parts[-1]] = value


def load_config(name: str, overrides: list[str] | tuple[str, ...] = (),
                run_name: str | None = None) -> TrainConfig:
    """The validated config from a file (path or shipped name) plus `--set` overrides."""
    problems = Problems()
    raw = overridden(read_yaml_mapping(resolve_config_path(name)), overrides, problems)
    if run_name is not None:
        raw["run_name"] = run_name
    config = checked_config(raw, problems)
    problems.raise_any()
    return config


def config_from_dict(raw: dict[str, Any]) -> TrainConfig:
    """Validate a plain mapping (from YAML or a checkpoint) into a `TrainConfig`; every
    problem found is named, in one `ConfigError`."""
    problems = Problems()
    config = checked_config(raw, problems)
    problems.raise_any()
    return config


def checked_config(raw: dict[str, Any], problems: Problems) -> TrainConfig:
    """`raw` validated as far as it goes: each problem is added to `problems` and its key
    keeps its default, so the config returned is only meaningful when there is none."""
    config = _build(TrainConfig(), raw, "", problems)
    check_cross_field(config, raw, problems)
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


def _build(default: Any, raw: Any, prefix: str, problems: Problems) -> Any:
    """`default` (a config section instance) with the keys given in `raw` replaced, in
    their order; a key with a problem keeps its default."""
    if not isinstance(raw, dict):
        problems.add(prefix.rstrip("."), f"config section '{prefix.rstrip('.')}' must be a "
                                         f"mapping, got {_show(raw)}")
        return default
    fields = {f.name: f for f in dataclasses.fields(default)}
    hints = typing.get_type_hints(type(default))
    values = {}
    for name, value in raw.items():
        key = prefix + str(name)
        if name not in fields:
            problems.add(key, _unknown_key_message(prefix, str(name), list(fields)))
            continue
        current = getattr(default, name)
        if dataclasses.is_dataclass(current):
            values[name] = _build(current, value, key + ".", problems)
            continue
        with problems.about(key):
            values[name] = _leaf(key, value, hints[name], fields[name])
    return dataclasses.replace(default, **values)


def _leaf(key: str, value: Any, hint: Any, field: dataclasses.Field) -> Any:
    """One key's value, checked and in its canonical type."""
    if typing.get_origin(hint) is dict:  # env_kwargs: plain data for the env
        return check_env_kwargs(key, value)
    return _convert(key, value, hint, field.metadata.get("range"))


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


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
