"""The everyday flags of `rltrain train` (`--env`, `--algo`, `--seed`, `--steps`,
`--device`) and `rltrain config show`, which prints the config a run would train with.

Each flag is exactly its `--set`: it becomes the same `key=value` override, read and
checked the same way (so `--seed abc` fails as `--set seed=abc` does). A flag and a
`--set` of the same key both given is refused rather than one silently winning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
import yaml

from rltrain.agents.registry import ALGORITHMS
from rltrain.utils.config.loader import apply_overrides, config_from_dict, resolve_config_path
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.config.zoo import train_mapping
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.safe_yaml import read_yaml_mapping

# flag name -> (config key, metavar)
FLAGS: dict[str, tuple[str, str]] = {
    "env": ("env_name", "ID"),
    "algo": ("algo", "|".join(ALGORITHMS)),
    "seed": ("seed", "N"),
    "steps": ("max_timesteps", "N"),
    "device": ("device", "auto|cpu|cuda"),
}


def everyday_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the five flags to a command; it receives them as keyword arguments."""
    defaults = config_to_dict(TrainConfig())
    for flag, (key, metavar) in reversed(FLAGS.items()):
        command = click.option(
            f"--{flag}", f"flag_{flag}", default=None, metavar=metavar,
            help=f"Same as --set {key}={metavar} (default: the config file's "
                 f"value, else {defaults[key]}).")(command)
    return command


def flag_overrides(overrides: tuple[str, ...], **flags: str | None) -> tuple[str, ...]:
    """`overrides` with each given flag appended as its `key=value`; a flag whose key a
    `--set` also names is a `ConfigError`."""
    named = {item.partition("=")[0].strip() for item in overrides}
    extra = []
    for flag, (key, _) in FLAGS.items():
        value = flags.get(f"flag_{flag}")
        if value is None:
            continue
        if key in named:
            raise ConfigError(f"--{flag} and --set {key}=... both given; use one of them")
        extra.append(f"{key}={value}")
    return (*overrides, *extra)


def to_stderr(line: str) -> None:
    click.echo(line, err=True)


def resolved_config(config_name: str | None, overrides: tuple[str, ...],
                    run_name: str | None = None, say_default: bool = True,
                    note: Callable[[str], None] = to_stderr) -> TrainConfig:
    """The config `rltrain train` trains with (and `rltrain sweep` each trial): a config
    file (flat, or per env as RL Zoo's), or without one the shipped per-env file of the
    algo for the env (rltrain's defaults where it has none, or without --env), then the
    overrides. Which defaults were taken is said in one line to `note`."""
    raw = None if config_name is None else read_yaml_mapping(resolve_config_path(config_name))
    raw = train_mapping(raw, config_name, given_value(overrides, "env_name"),
                        given_value(overrides, "algo"), note, say_default)
    raw = apply_overrides(raw, overrides)
    if run_name is not None:
        raw["run_name"] = run_name
    return config_from_dict(raw)


def given_value(overrides: tuple[str, ...], key: str) -> str | None:
    """The last value an override (a flag's or a --set) gives `key`, as text."""
    values = [text.strip().strip("'\"") for item in overrides
              for name, _, text in [item.partition("=")] if name.strip() == key]
    return values[-1] if values else None


@click.group("config")
def config_group() -> None:
    """Show the config a run would train with (`rltrain config show`)."""


@config_group.command("show")
@click.option("--config", "config_name", default=None, metavar="FILE",
              help="YAML config: a path or a shipped config's name (default: none, "
                   "rltrain's defaults).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, as on `rltrain train` (repeatable).")
@everyday_options
def show(config_name: str | None, overrides: tuple[str, ...], **flags: str | None) -> None:
    """Print the resolved config, every key with its value, as YAML.

    This is the config `rltrain train` with the same --config, --set and flags would
    train with (the `td3` section is shown only with algo td3).
    """
    config = resolved_config(config_name, flag_overrides(overrides, **flags), say_default=False)
    click.echo(yaml.safe_dump(config_to_dict(config), sort_keys=False), nl=False)
