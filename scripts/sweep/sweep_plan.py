"""The plan of an `rltrain sweep`: its grid and seeds as trials, each a validated config;
the plan read back from `sweep.yaml` for `--resume`.

`--grid key=v1,v2` items take the full product, times `--seeds` seeds (the config's
seed, seed+1, ...); each (grid point, seed) is one trial with its own run name. A
trial's config is chosen as `rltrain train` chooses one (`trial_config`): a flat file, a
per-env file's section for the trial's env, or the shipped tuned values for its algo and
env. Every trial's config is built here, before anything runs, so that a typo or an
out-of-range value fails up front. Running the plan on Ray Tune is scripts/sweep/sweep.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from rltrain.utils.config.cross_checks import folder_name_problem
from rltrain.utils.config.fields import COMMAND_KEYS, NOT_FROM_FILES
from rltrain.utils.config.loader import apply_overrides
from rltrain.utils.config.resolve import ConfigRequest, resolve_config
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.errors import ConfigError, UserError
from rltrain.utils.io.safe_yaml import read_yaml_mapping


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


def check_sweep_name(name: str) -> None:
    """A sweep's name is its folder's: checked as a run name is."""
    problem = folder_name_problem(name, "a sweep's name")
    if problem is not None:
        raise UserError(problem)


def read_plan(path: Path) -> dict[str, Any]:
    """The plan a sweep wrote (`sweep.yaml`), each part checked: a damaged or hand-edited
    file is one line (UserError), never a traceback."""
    try:
        plan = read_yaml_mapping(path)
    except ConfigError as exc:
        raise UserError(f"the sweep's plan is unreadable: {exc}") from None
    problem = _plan_problem(plan)
    if problem is not None:
        raise UserError(f"the sweep's plan '{path}' is damaged ({problem}); it is the file "
                        "`rltrain sweep` wrote, not to be edited")
    return plan


def _plan_problem(plan: dict[str, Any]) -> str | None:
    def number(key: str, low: float, optional: bool = False) -> bool:
        value = plan.get(key)
        return (optional and value is None) or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and value >= low)

    if not (plan.get("config") is None or isinstance(plan.get("config"), str)):
        return "'config' is not a file name"
    for key, low, optional in (("cpus_per_trial", 0.1, False), ("gpus_per_trial", 0, True),
                               ("max_failures", 0, False), ("max_concurrent", 1, True)):
        if not number(key, low, optional):
            return f"'{key}' is not a number >= {low}"
    trials = plan.get("trials")
    if not isinstance(trials, list) or not trials:
        return "'trials' is not a list of trials"
    for trial in trials:
        if not (isinstance(trial, dict) and isinstance(trial.get("run_name"), str)
                and folder_name_problem(trial["run_name"], "") is None
                and isinstance(trial.get("point"), str)
                and isinstance(trial.get("overrides"), list)
                and all(isinstance(o, str) for o in trial["overrides"])):
            return f"a trial is not a run name, a point and a list of overrides: {trial!r:.80}"
    return None


def plan_for_resume(plan: dict[str, Any], sweep_dir: Path, overrides: tuple[str, ...],
                    note: Callable[[str], None]) -> dict[str, Any]:
    """The plan with its trials' commands, addresses and folders (`NOT_FROM_FILES`) not
    taken from sweep.yaml (a file in a folder, which may not be the user's): the trials
    write into `sweep_dir`, their checkpoints into `--set checkpoint_dir` (+ the sweep's
    name), else where the plan says if that is the default `checkpoints/<sweep>` of the
    current folder; notify and ray_address come from `overrides` only. `note` is told
    what was left out."""
    settable = [k for k in NOT_FROM_FILES if k != "log_dir"]
    for item in overrides:
        if item.partition("=")[0].strip() not in settable:
            raise UserError(f"with --resume, --set takes only {', '.join(settable)} (the "
                            f"rest is the sweep's plan); got '{item}'")
    given = dict(item.partition("=")[::2] for item in overrides)
    checkpoints = _resume_checkpoint_dir(plan, sweep_dir, given.pop("checkpoint_dir", None))
    left_out: set[str] = set()
    trials = []
    for trial in plan["trials"]:
        planned = trial_config(plan["config"], trial["overrides"])
        left_out |= {key for key in COMMAND_KEYS if _value(planned, key) is not None}
        kept = [o for o in trial["overrides"]
                if o.partition("=")[0].strip() not in NOT_FROM_FILES]
        trials.append({**trial, "overrides": [
            *kept, f"log_dir={sweep_dir}", f"checkpoint_dir={checkpoints}",
            *(f"{key}=null" for key in COMMAND_KEYS),
            *(f"{key}={value}" for key, value in given.items())]})
    left_out -= set(given)
    if left_out:
        note(f"not taken from the sweep's plan (commands and addresses come only from your "
             f"own --set): {', '.join(sorted(left_out))}")
    return {**plan, "trials": trials}


def _resume_checkpoint_dir(plan: dict[str, Any], sweep_dir: Path, given: str | None) -> Path:
    if given is not None:
        return Path(given).resolve() / sweep_dir.name
    default = Path("checkpoints").resolve() / sweep_dir.name
    planned = {trial_config(plan["config"], t["overrides"]).checkpoint_dir
               for t in plan["trials"]}
    if planned != {str(default)}:
        where = ", ".join(sorted(planned))
        raise UserError(f"the sweep's plan puts its checkpoints in '{where}', not "
                        f"'{default}': to continue there, add --set checkpoint_dir="
                        f"{Path(sorted(planned)[0]).parent}")
    return default


def _value(config: TrainConfig, key: str) -> Any:
    section, _, name = key.rpartition(".")
    return getattr(getattr(config, section) if section else config, name)
