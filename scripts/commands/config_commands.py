"""The everyday flags of `rltrain train` (`--env`, `--algo`, `--seed`, `--steps`,
`--device`, `--workers`) and `rltrain config show`, which prints the config a run would train with.

Each flag is exactly its `--set`: it becomes the same `key=value` override, read and
checked the same way (so `--seed abc` fails as `--set seed=abc` does). A flag and a
`--set` of the same key both given is refused rather than one silently winning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
import yaml

from rltrain.agents.registry import trained_names
from rltrain.utils.config.resolve import ConfigRequest, resolve_config
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import ConfigError

# flag name -> (config key, metavar)
FLAGS: dict[str, tuple[str, str]] = {
    "env": ("env_name", "ID"),
    "algo": ("algo", "|".join(trained_names())),
    "seed": ("seed", "N"),
    "steps": ("max_timesteps", "N"),
    "device": ("device", "auto|cpu|cuda"),
    "workers": ("num_workers", "N"),
}


def everyday_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the six flags to a command; it receives them as keyword arguments."""
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
    config = resolve_config(ConfigRequest(config_name, flag_overrides(overrides, **flags)),
                            to_stderr, say_default=False)
    click.echo(yaml.safe_dump(config_to_dict(config), sort_keys=False), nl=False)
