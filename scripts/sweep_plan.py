"""The plan of an `rltrain sweep`: its grid and seeds as trials, each a validated config.

`--grid key=v1,v2` items take the full product, times `--seeds` seeds (the config's
seed, seed+1, ...); each (grid point, seed) is one trial with its own run name. A
trial's config is chosen as `rltrain train` chooses one (`trial_config`): a flat file, a
per-env file's section for the trial's env, or the shipped tuned values for its algo and
env. Every trial's config is built here, before anything runs, so that a typo or an
out-of-range value fails up front. Running the plan on Ray Tune is scripts/sweep.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

from rltrain.utils.config.loader import apply_overrides
from rltrain.utils.config.resolve import ConfigRequest, resolve_config
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import ConfigError, UserError


@dataclass(frozen=True)
class Trial:
    run_name: str
    point: str  # the grid point, e.g. "actor_lr=0.001,tau=0.01" ("base" without a grid)
    overrides: tuple[str, ...]


# Keys the sweep sets for each trial itself: a grid over them would be overwritten by it,
# or would move trials out of the sweep's folders.
SET_BY_SWEEP = {
    "seed": "trials take the config's seed, seed+1, ... (--seeds N)",
    "run_name": "the sweep names its trials",
    "log_dir": "the trials write into the sweep's folder (--set log_dir moves the sweep)",
    "checkpoint_dir": "the trials write into the sweep's folder (--set checkpoint_dir "
                      "moves the sweep)",
}


def parse_grid(items: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """`key=v1,v2` items -> [(key, ["v1", "v2"])], refusing malformed specs and keys the
    sweep sets itself. A value may be a YAML list: `hidden_sizes=[64,64],[256,256]`."""
    grid = []
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        choices = _split_values(values)
        if not sep or not key or not values.strip() or any(not v for v in choices):
            raise ConfigError(f"--grid expects key=v1,v2,... (comma-separated values), "
                              f"got '{item}'")
        if key in (k for k, _ in grid):
            raise ConfigError(f"--grid names '{key}' twice")
        if key in SET_BY_SWEEP:
            raise ConfigError(f"--grid cannot vary '{key}': {SET_BY_SWEEP[key]}")
        grid.append((key, choices))
    return grid


def _split_values(text: str) -> list[str]:
    """`v1,v2,...` split at the commas outside brackets and quoted scalars (as in YAML, a
    quote opens one only where a scalar starts: `it's` is plain, `['a,b']` quoted)."""
    values, depth, quote, start, escaped, before = [], 0, "", 0, False, ","
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"" and before in ",[{:":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"--grid: unbalanced '{char}' in '{text}'")
        elif char == "," and depth == 0:
            values.append(text[start:index].strip())
            start = index + 1
        if not char.isspace():
            before = char
    return [*values, text[start:].strip()]


def trial_config(config_name: str | None, overrides: Sequence[str],
                 note: Callable[[str], None] | None = None,
                 check_env: bool = False) -> TrainConfig:
    """A trial's config, built as `rltrain train` builds one from `--config` and the
    overrides (which hold --env and --algo as env_name=, algo=). `note` is told which
    defaults were taken; a trial running on Tune says nothing (the sweep said it). With
    `check_env` the env id is checked first, as `rltrain train` checks it (the plan does;
    a trial on Tune, planned so, makes its env)."""
    return resolve_config(ConfigRequest(config_name, tuple(overrides)),
                          note or (lambda line: None),
                          check_env=_check_env_id if check_env else None)


def _check_env_id(env_name: str) -> None:
    """utils/training/envs.py's check, imported (with Gymnasium) when a sweep is planned."""
    from rltrain.utils.training.envs import check_env_id

    check_env_id(env_name)


def say_once(say: Callable[[str], None]) -> Callable[[str], None]:
    """`say`, for each line only the first time: a note on every trial is said once."""
    said: set[str] = set()

    def once(line: str) -> None:
        if line not in said:
            said.add(line)
            say(line)
    return once


def plan_trials(config_name: str | None, overrides: tuple[str, ...],
                grid_items: tuple[str, ...], seeds: int, sweep: str,
                note: Callable[[str], None] | None = None) -> list[Trial]:
    """Every (grid point, seed) as a validated config, built as the trial will build it
    (`trial_config`); any bad value fails here, up front."""
    if seeds < 1:
        raise UserError("--seeds must be at least 1")
    if any(item.partition("=")[0].strip() == "run_name" for item in overrides):
        raise ConfigError(f"--set run_name: {SET_BY_SWEEP['run_name']} (<sweep>_s<seed>)")
    grid = parse_grid(grid_items)
    base = trial_config(config_name, overrides, note, check_env=True)
    raw = config_to_dict(base)
    trials: list[Trial] = []
    for values in itertools.product(*(choices for _, choices in grid)):
        point_items = tuple(f"{k}={v}" for (k, _), v in zip(grid, values, strict=True))
        point = ",".join(point_items) or "base"
        apply_overrides(raw, point_items, option="--grid")  # a value that is not YAML
        for index in range(seeds):
            seed = base.seed + index
            name = _slug(f"{sweep}_{point}_s{seed}" if grid else f"{sweep}_s{seed}")
            items = (*overrides, *point_items, f"seed={seed}", f"run_name={name}")
            trial_config(config_name, items, note, check_env=True)  # the point, the name
            same = next((t for t in trials if t.run_name == name), None)
            if same is not None:
                raise ConfigError(f"--grid points '{same.point}' and '{point}' make the same "
                                  f"trial '{name}' (a value given twice?)")
            trials.append(Trial(name, point, items))
    return trials


def _slug(text: str) -> str:
    """A run folder name: `grid_tau=0.01,seed=3` -> `grid_tau-0.01_seed-3`,
    `g_hidden_sizes=[64,64]` -> `g_hidden_sizes-64_64`."""
    return "".join(c if c.isalnum() or c in "-_." else "_" if c == "," else "-"
                   for c in text if c not in "[]{} ")
