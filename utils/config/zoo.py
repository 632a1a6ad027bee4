"""Hyperparameters per env id, as RL Zoo keeps them: `configs/<algo>.yaml` and RL Zoo files.

A per-env file maps Gymnasium env ids to sections of config keys (`Pendulum-v1:
{gamma: 0.98, ...}`), as rl-baselines3-zoo's `hyperparams/<algo>.yml` do. rltrain ships
one per algorithm (configs/ddpg.yaml, configs/td3.yaml, translated from RL Zoo's tuned
values); `rltrain train --algo td3 --env ID` takes ID's section of td3.yaml. A file given
with `--config` may be one too, in rltrain's key names or in RL Zoo's: its section for
`--env` (or RL Zoo's `default` section, or the file's only env) is translated here into
rltrain's keys. RL Zoo writes some values as Python expressions
(`policy_kwargs: "dict(net_arch=[400, 300])"`); those are read by walking their syntax
tree for plain literals, never evaluated. What has no rltrain equivalent is refused in
one line naming what is supported.
"""

from __future__ import annotations

import ast
import dataclasses
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from rltrain.agents.registry import ALGORITHMS, algorithm
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.safe_yaml import read_yaml_mapping

SHIPPED = "rltrain.configs"
ZOO_DEFAULT = "default"  # RL Zoo's section for the envs a file does not list

# RL Zoo name -> rltrain key, for the keys every algorithm has; an algorithm's own options
# are named by its registry entry (`Algorithm.library_names`: `policy_delay` is
# td3.policy_delay in td3.yml and crossq.policy_delay in crossq.yml).
RENAMED = {
    "n_timesteps": "max_timesteps", "buffer_size": "replay_buffer_size",
    "noise_std": "exploration_noise",
}
# RL Zoo's "dict(...)" texts are a few hundred characters; a longer one is not parsed
# (Python's parser can run out of memory or stack on a long, deeply nested text).
MAX_DICT_TEXT = 10_000
NOISE_TYPES = {"normal": "gaussian", "ornstein-uhlenbeck": "ou", "gaussian": "gaussian", "ou": "ou"}
ACTIVATIONS = {"ReLU": "relu", "Tanh": "tanh", "ELU": "elu", "GELU": "gelu"}
SUPPORTED = ("n_timesteps, learning_rate, buffer_size, learning_starts, batch_size, gamma, "
             "tau, train_freq, gradient_steps, noise_type, noise_std, policy_kwargs "
             "(net_arch, activation_fn, and the algorithm's own), env_kwargs, normalize, "
             "policy: MlpPolicy, and the algorithm's own options")
REFUSED = {
    "n_envs": "rltrain's num_envs keeps utd_ratio per env step; set num_envs instead",
    "env_wrapper": "wrap the env in your own registered env ('module:EnvName-v0')",
    "vec_env_wrapper": "wrap the env in your own registered env ('module:EnvName-v0')",
    "frame_stack": "stack frames in your own registered env ('module:EnvName-v0')",
    "callback": "rltrain's hooks replace callbacks",
    "replay_buffer_class": "rltrain has one replay buffer",
    "replay_buffer_kwargs": "rltrain has one replay buffer",
    "use_sde": "rltrain explores with gaussian or ou noise",
}


def is_per_env(raw: dict[str, Any]) -> bool:
    """A per-env file: every top-level key is not a config key and holds a mapping."""
    keys = {f.name for f in dataclasses.fields(TrainConfig)}
    return bool(raw) and all(k not in keys and isinstance(v, dict) for k, v in raw.items())


def shipped_per_env_file(algo: str) -> Path:
    """configs/<algo>.yaml, installed with rltrain."""
    return Path(str(resources.files(SHIPPED).joinpath(f"{algo}.yaml")))


def section_for(raw: dict[str, Any], env: str | None, source: str) -> tuple[str, dict]:
    """(env id, its section) of a per-env file: `env`'s, RL Zoo's `default` for an env it
    does not list, or the file's only env when no env is named."""
    envs = [k for k in raw if k != ZOO_DEFAULT]
    if env is not None:
        if env in raw:
            return env, raw[env]
        if ZOO_DEFAULT in raw:
            return env, raw[ZOO_DEFAULT]
        raise ConfigError(f"config '{source}' has no entry for env '{env}' (it has: "
                          f"{', '.join(envs)})")
    if len(envs) == 1:
        return envs[0], raw[envs[0]]
    raise ConfigError(f"config '{source}' holds hyperparameters for several envs "
                      f"({', '.join(envs)}); choose one with --env")


def per_env_section(raw: dict[str, Any], env: str | None, source: str,
                    algo: str | None = None) -> dict[str, Any]:
    """The rltrain config mapping of a per-env file's section for `env`; its algo is the
    section's, else the file's name when that is an algorithm's (RL Zoo's `td3.yml`).
    The algorithm's own options are translated by the names its registry entry gives
    them, the algorithm being `algo` (the command line's, which the run takes) where
    given."""
    env_id, section = section_for(raw, env, source)
    stem = Path(source).stem
    named = algo or section.get("algo") or (stem if stem in ALGORITHMS else None)
    result = translate(section, f"config '{source}', env '{env_id}'",
                       named if named in ALGORITHMS else None)
    result.setdefault("env_name", env_id)
    if "algo" not in result and stem in ALGORITHMS:
        result["algo"] = stem
    return result


def translate(section: dict[str, Any], where: str, algo: str | None = None) -> dict[str, Any]:
    """A section's keys in rltrain's names (`algo`'s options by its entry's names; an
    option of no known algorithm stays as it is, and the config names it unknown);
    rltrain's own names pass as they are."""
    result: dict[str, Any] = {}
    freq, steps = section.get("train_freq"), section.get("gradient_steps")
    own = {} if algo is None else algorithm(algo).library_names()
    for key, value in section.items():
        if key in ("train_freq", "gradient_steps"):
            continue
        for name, converted in _translated(str(key), value, where, own):
            _put(result, name, converted)
    if freq is not None or steps is not None:
        result["utd_ratio"] = utd_ratio(freq, steps, where)
    return result


def _translated(key: str, value: Any, where: str,
                own: dict[str, str]) -> list[tuple[str, Any]]:
    """The (rltrain key, value) pairs of one RL Zoo key; `own`: the algorithm's options by
    their library names."""
    if key in REFUSED:
        raise ConfigError(f"{where}: RL Zoo's '{key}' is not supported ({REFUSED[key]}); "
                          f"supported: {SUPPORTED}")
    if key == "policy":
        if value != "MlpPolicy":
            raise ConfigError(f"{where}: policy {value!r} is not supported (MlpPolicy only)")
        return []
    if key == "learning_rate":
        rate = _number(value, key, where, "a number (learning-rate schedules are not "
                                          "supported)")
        return [("actor_lr", rate), ("critic_lr", rate)]
    if key == "noise_type":
        if value not in NOISE_TYPES:
            raise ConfigError(f"{where}: noise_type {value!r} is not supported (normal or "
                              "ornstein-uhlenbeck, or rltrain's gaussian or ou)")
        return [("noise_type", NOISE_TYPES[value])]
    if key == "policy_kwargs":
        return _policy_kwargs(_mapping(value, key, where), where, own)
    if key == "env_kwargs":
        return [("env_kwargs", _mapping(value, key, where))]
    if key == "normalize":
        return [("normalize", _normalize(value, where))]
    return [(own.get(key, RENAMED.get(key, key)), value)]


def utd_ratio(freq: Any, steps: Any, where: str) -> int:
    """Updates per env step from RL Zoo's train_freq and gradient_steps (SB3's defaults
    1 and 1): `gradient_steps: -1` is as many updates as env steps collected."""
    every, unit = (freq if isinstance(freq, (list, tuple)) and len(freq) == 2
                   else (1 if freq is None else freq, "step"))
    steps = 1 if steps is None else steps
    if steps == -1:
        return 1
    if unit != "step" or not _positive_int(every) or not _positive_int(steps) \
            or steps % every:
        raise ConfigError(f"{where}: train_freq {freq!r} with gradient_steps {steps!r} has "
                          "no rltrain equivalent (rltrain updates utd_ratio times after every "
                          "env step: gradient_steps a multiple of an integer train_freq, or "
                          "gradient_steps -1)")
    return steps // every


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _number(value: Any, key: str, where: str, must: str) -> float:
    if not isinstance(value, bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    raise ConfigError(f"{where}: {key} {value!r} must be {must}")


def _policy_kwargs(kwargs: dict[str, Any], where: str,
                   own: dict[str, str]) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for key, value in kwargs.items():
        if f"policy_kwargs.{key}" in own:  # the algorithm's own (tqc's n_quantiles)
            pairs.append((own[f"policy_kwargs.{key}"], value))
        elif key == "net_arch" and isinstance(value, dict):
            pairs += [("networks.actor.hidden_sizes", value.get("pi")),
                      ("networks.critic.hidden_sizes", value.get("qf"))]
        elif key == "net_arch":
            pairs.append(("hidden_sizes", value))
        elif key == "activation_fn" and str(value).rpartition(".")[2] in ACTIVATIONS:
            name = ACTIVATIONS[str(value).rpartition(".")[2]]
            pairs += [("networks.actor.activation", name), ("networks.critic.activation", name)]
        else:
            theirs = ", ".join(k.partition(".")[2] for k in own
                               if k.startswith("policy_kwargs."))
            raise ConfigError(f"{where}: policy_kwargs {key}={value!r} is not supported "
                              "(net_arch, and activation_fn nn.ReLU, nn.Tanh, nn.ELU or "
                              "nn.GELU" + (f"; the algorithm's own: {theirs}" if theirs
                                           else "") + ")")
    return [(k, v) for k, v in pairs if v is not None]


def _normalize(value: Any, where: str) -> dict[str, Any]:
    """RL Zoo's `normalize: true` or "dict(norm_obs=..., norm_reward=...)" (VecNormalize's
    arguments) as rltrain's normalize section."""
    if isinstance(value, bool):
        return {"observations": value, "rewards": value}
    names = {"norm_obs": "observations", "norm_reward": "rewards", "clip_obs": "clip",
             "epsilon": "epsilon"}
    given = _mapping(value, "normalize", where)
    unknown = [k for k in given if k not in names]
    if unknown:
        raise ConfigError(f"{where}: normalize {unknown[0]!r} is not supported "
                          f"({', '.join(names)})")
    return {"observations": True, "rewards": True,
            **{names[k]: v for k, v in given.items()}}


def _mapping(value: Any, key: str, where: str) -> dict[str, Any]:
    """A mapping, or RL Zoo's "dict(a=1, b=[2, 3])" text read as literals only."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        parsed = _dict_call(value)
        if parsed is not None:
            return parsed
    shown = repr(value) if len(repr(value)) <= 200 else f"{repr(value)[:200]}... (cut)"
    raise ConfigError(f"{where}: {key} must be a mapping or a \"dict(key=literal, ...)\" "
                      f"text of at most {MAX_DICT_TEXT} characters; got {shown}")


def _dict_call(text: str) -> dict[str, Any] | None:
    """`dict(k=v, ...)` whose values are literals, nested dict(...) or dotted names
    (`nn.ReLU`, kept as text); None for anything else. Nothing is evaluated."""
    if len(text) > MAX_DICT_TEXT:
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return _dict_node(tree)


def _dict_node(node: ast.AST) -> dict[str, Any] | None:
    if isinstance(node, ast.Dict):
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, MemoryError, RecursionError):
            return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "dict" and not node.args):
        return None
    result: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        value = _literal(keyword.value)
        if value is _NOT_LITERAL:
            return None
        result[keyword.arg] = value
    return result


_NOT_LITERAL = object()


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Call):
        nested = _dict_node(node)
        return _NOT_LITERAL if nested is None else nested
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, MemoryError, RecursionError):
        return _NOT_LITERAL


def _put(result: dict[str, Any], dotted: str, value: Any) -> None:
    *sections, name = dotted.split(".")
    node = result
    for section in sections:
        node = node.setdefault(section, {})
    node[name] = value


def train_mapping(raw: dict[str, Any] | None, source: str | None, env: str | None,
                  algo: str | None, note: Callable[[str], None],
                  say_default: bool = True) -> dict[str, Any]:
    """The config mapping `rltrain train` starts from, before --set and the flags:
    a flat file as it is, a per-env file's section for `env`, without a file the shipped
    `<algo>.yaml`'s section for `env` (rltrain's defaults where it has none), without
    either rltrain's defaults. `note` gets a line saying which defaults were taken (for
    the last case only with `say_default`)."""
    if raw is not None:
        assert source is not None
        return per_env_section(raw, env, source, algo) if is_per_env(raw) else raw
    if env is None:
        if say_default:
            note("no --config or --env given: using rltrain's default config (Pendulum-v1; "
                 "`rltrain config show` prints it)")
        return {}
    name = algo or TrainConfig().algo
    path = shipped_per_env_file(name)
    shipped = read_yaml_mapping(path) if path.is_file() else {}
    if env not in shipped:
        note(f"no tuned {name} hyperparameters for {env} in {path.name}: using "
             f"rltrain's defaults (`rltrain config show --algo {name} --env {env}`)")
        return {}
    return per_env_section({env: shipped[env]}, env, path.name)
