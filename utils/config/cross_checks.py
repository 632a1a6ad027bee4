"""The config's checks across keys, run once every key has its type and range
(utils/config/loader.py). Each check names the keys it reads: it is skipped when one of
them already has a problem (utils/config/problems.py), and every other check still runs,
so that one run of a command names every independent problem."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from rltrain.agents.registry import ALGORITHMS, algorithm, trained_names
from rltrain.utils.config.fields import rules_of
from rltrain.utils.config.problems import Problems
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.diagnosis.rules.registry import spec
from rltrain.utils.errors import ConfigError
from rltrain.utils.run.notify_target import check_notify

NOISE_KEYS = ("exploration_noise", "noise_type", "ou_theta", "exploration_noise_final",
              "noise_decay_steps")

Check = Callable[[TrainConfig, dict[str, Any]], None]


def check_cross_field(config: TrainConfig, raw: dict[str, Any], problems: Problems) -> None:
    """Every check of `CHECKS` whose keys have no problem yet; its problem added to
    `problems`. The rules' thresholds are checked rule by rule."""
    for keys, check in CHECKS:
        if not problems.touch(keys):
            with problems.about(keys[0]):
                check(config, raw)
    for section in ("monitor", "diagnostics"):
        _check_rule_thresholds(section, getattr(config, section), problems)
    for keys, check in LAST_CHECKS:
        if not problems.touch(keys):
            with problems.about(keys[0]):
                check(config, raw)


def _batch_fits_the_buffer(config: TrainConfig, raw: dict[str, Any]) -> None:
    if config.batch_size > config.replay_buffer_size:
        raise ConfigError(f"config key 'batch_size' ({config.batch_size}) must not exceed "
                          f"replay_buffer_size ({config.replay_buffer_size})")


def _learning_starts_before_the_end(config: TrainConfig, raw: dict[str, Any]) -> None:
    if config.learning_starts >= config.max_timesteps:
        raise ConfigError(f"config key 'learning_starts' ({config.learning_starts}) must be "
                          f"below max_timesteps ({config.max_timesteps}): no update would run")


def _sections_of_the_algorithm(config: TrainConfig, raw: dict[str, Any]) -> None:
    for entry in ALGORITHMS.values():
        if entry.section in raw and config.algo != entry.name:
            raise ConfigError(f"config section '{entry.section}' applies only with algo: "
                              f"{entry.name} (algo is {config.algo})")


def _options_of_the_algorithm(config: TrainConfig, raw: dict[str, Any]) -> None:
    """What the algorithm's own options dataclass refuses across its keys (its
    `__post_init__`, e.g. tqc's quantiles to drop against its quantiles)."""
    entry = algorithm(config.algo)
    if entry.section is not None:
        try:
            entry.options_from(dataclasses.asdict(getattr(config, entry.section)))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def _watched_only(config: TrainConfig, raw: dict[str, Any]) -> None:
    """A watched-only algorithm (PPO, A2C, DQN) names a run another library or loop
    trains (its settings in `library`); rltrain cannot train one itself."""
    if not algorithm(config.algo).trained and not config.library:
        raise ConfigError(f"algo {config.algo} is watched, not trained, by rltrain: train it "
                          f"with Stable-Baselines3 and RltrainCallback, or in your own loop "
                          f"with the Watcher (docs/integrations.md); rltrain trains "
                          f"{', '.join(trained_names())}")


def _tau_needs_a_target(config: TrainConfig, raw: dict[str, Any]) -> None:
    """`tau` set away from its default for an algorithm that keeps no target network:
    refused, as it would silently change nothing."""
    if not algorithm(config.algo).targets and config.tau != TrainConfig().tau:
        raise ConfigError(f"config key 'tau' sets the target networks' Polyak rate, and algo "
                          f"{config.algo} keeps no target network; leave tau out")


def _action_noise(config: TrainConfig, raw: dict[str, Any]) -> None:
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


def _noise_decay_has_an_end(config: TrainConfig, raw: dict[str, Any]) -> None:
    if config.noise_decay_steps is not None and config.exploration_noise_final is None:
        raise ConfigError("config key 'noise_decay_steps' needs exploration_noise_final "
                          "(the std to decay to)")


def _check_rule_thresholds(name: str, section: Any, problems: Problems) -> None:
    """A rule whose default has no threshold cannot be given one; any other rule that is
    not off needs a number > 0 (null would only fail later, mid-run)."""
    defaults = rules_of(type(section)())
    for rule_name, rule in rules_of(section).items():
        key = f"{name}.{rule_name}.threshold"
        if problems.touch((f"{name}.{rule_name}",)):
            continue
        if defaults[rule_name].threshold is None:
            if rule.threshold is not None:
                problems.add(key, f"config key '{key}' cannot be set; its threshold is "
                                  f"{spec(rule_name).fixed_threshold}")
        elif rule.action != "off" and (rule.threshold is None or rule.threshold <= 0):
            problems.add(key, f"config key '{key}' must be a number > 0 "
                              f"(or set {name}.{rule_name}.action: off)")


def _state_bounds_match(config: TrainConfig, raw: dict[str, Any]) -> None:
    bounds = config.monitor.state_bounds
    if bounds.low is not None and bounds.high is not None and len(bounds.low) != len(bounds.high):
        raise ConfigError("config keys 'monitor.state_bounds.low' and '.high' must have the "
                          "same length")


def _notify_target(config: TrainConfig, raw: dict[str, Any]) -> None:
    check_notify(config.notify)


def _workers_without_normalize(config: TrainConfig, raw: dict[str, Any]) -> None:
    """Env runners keep no shared running statistics: each would normalise with its own."""
    normalized = config.normalize.observations or config.normalize.rewards
    if config.num_workers and normalized:
        raise ConfigError("config key 'num_workers' cannot be combined with normalize.* yet "
                          "(each runner would normalise with its own statistics); use "
                          "num_workers: 0, or turn normalize off")


MAX_NAME_BYTES = 255  # a file name's limit on Linux, macOS and Windows file systems


def folder_name_problem(name: str, what: str) -> str | None:
    """Why `name` cannot name a run's or a sweep's folder (None: it can): a plain folder
    name, one path component, nothing that leads out of its parent folder."""
    if name in (".", "..") or not name or not all(c.isalnum() or c in "-_." for c in name):
        return (f"{what} must be a plain folder name (letters, digits, '-', '_', '.'); "
                f"got {name!r}")
    if len(name.encode()) > MAX_NAME_BYTES:  # else the write fails, an exit 4
        return (f"{what} is {len(name.encode())} bytes long; a folder name has at most "
                f"{MAX_NAME_BYTES} (the file system's limit)")
    return None


MAX_NUM_ENVS = 4096  # training envs of one process (100000 took the run's start forever)
PROCESSES_PER_CORE = 4  # async env workers or local env runners a core may carry


def _envs_fit_the_machine(config: TrainConfig, raw: dict[str, Any]) -> None:
    """Envs and runners in numbers the machine can start: 100000 envs or 500 runners
    on one machine hung, with Ray's worker processes left behind."""
    cores = os.cpu_count() or 1
    if config.num_envs > MAX_NUM_ENVS:
        raise ConfigError(f"config key 'num_envs' is {config.num_envs}; at most "
                          f"{MAX_NUM_ENVS} envs step in one process")
    processes = PROCESSES_PER_CORE * cores
    if config.vector_mode == "async" and config.num_envs > processes:
        raise ConfigError(f"config key 'num_envs' is {config.num_envs} with vector_mode "
                          f"async, a process each; this machine's {cores} cores carry at "
                          f"most {processes} (use vector_mode sync, or fewer envs)")
    if config.num_workers > processes and config.ray_address is None:
        raise ConfigError(f"config key 'num_workers' is {config.num_workers}, each runner a "
                          f"process on this machine's {cores} cores, which carry at most "
                          f"{processes}; join a cluster (ray_address) for more")


def _run_name_is_a_folder_name(config: TrainConfig, raw: dict[str, Any]) -> None:
    name = config.run_name
    problem = None if name is None else folder_name_problem(name, "config key 'run_name'")
    if problem is not None:
        raise ConfigError(problem)


# (the keys a check reads, the first one the key its problem is about; the check), in the
# order their problems are listed.
CHECKS: tuple[tuple[tuple[str, ...], Check], ...] = (
    (("batch_size", "replay_buffer_size"), _batch_fits_the_buffer),
    (("learning_starts", "max_timesteps"), _learning_starts_before_the_end),
    (("algo",), _sections_of_the_algorithm),
    (("algo",), _options_of_the_algorithm),
    (("algo", "library"), _watched_only),
    (("tau", "algo"), _tau_needs_a_target),
    (("algo", *NOISE_KEYS), _action_noise),
    (("noise_decay_steps", "exploration_noise_final"), _noise_decay_has_an_end),
    (("num_workers", "normalize"), _workers_without_normalize),
    (("num_envs", "vector_mode", "num_workers", "ray_address"), _envs_fit_the_machine),
)
LAST_CHECKS: tuple[tuple[tuple[str, ...], Check], ...] = (
    (("monitor.state_bounds",), _state_bounds_match),
    (("notify",), _notify_target),
    (("run_name",), _run_name_is_a_folder_name),
)
