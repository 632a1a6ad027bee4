"""RLlib's SAC AlgorithmConfig in rltrain's config keys and in RLlib's own names.

`rllib_settings` records what the algorithm trains with as its AlgorithmConfig names it
(`train_batch_size_per_learner`, `num_steps_sampled_before_learning_starts`,
`replay_buffer_config`, `model_config`, ...): config.yaml keeps it under `library`,
beside the rltrain keys the rules judge with (`rllib_config`). `RLlibKeys` turns a
finding's `suggested_set` into the RLlib settings that make the change, and says so in
the message where RLlib has none. `check_algorithm` says what the callback cannot
watch. This module reads the config's attributes only and
imports nothing of Ray.
"""

from __future__ import annotations

from typing import Any

from rltrain.integrations.library_keys import plain, translated
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.findings import Finding

# rltrain's key -> RLlib SAC's setting, where the value carries over as it is.
SAME_VALUE = {"gamma": "gamma", "tau": "tau", "actor_lr": "actor_lr",
              "critic_lr": "critic_lr", "batch_size": "train_batch_size_per_learner",
              "learning_starts": "num_steps_sampled_before_learning_starts",
              "sac.target_entropy": "target_entropy"}


def check_algorithm(algorithm: Any) -> None:
    """RLlib's SAC with its learner in this process and one env per env runner; anything
    else is a ConfigError naming what to change."""
    config = algorithm.config
    if type(algorithm).__name__ != "SAC":
        raise ConfigError(f"the rltrain callback watches RLlib's SAC, not "
                          f"{type(algorithm).__name__}")
    if config.num_learners or not algorithm.learner_group.is_local:
        raise ConfigError("the rltrain callback needs RLlib's learner in this process: "
                          f"set learners(num_learners=0), not {config.num_learners}")
    if config.num_envs_per_env_runner != 1:
        raise ConfigError("the rltrain callback watches one env: set env_runners("
                          f"num_envs_per_env_runner=1), not {config.num_envs_per_env_runner}")


# RLlib's SAC settings recorded under config.yaml's `library`, in RLlib's names.
SETTINGS = ("gamma", "tau", "actor_lr", "critic_lr", "alpha_lr", "lr", "initial_alpha",
            "target_entropy", "twin_q", "n_step", "train_batch_size_per_learner",
            "num_steps_sampled_before_learning_starts", "replay_buffer_config",
            "training_intensity", "target_network_update_freq", "model_config",
            "num_env_runners", "num_envs_per_env_runner", "rollout_fragment_length",
            "num_learners", "normalize_actions", "clip_actions", "grad_clip",
            "grad_clip_by", "log_gradients", "seed", "env", "env_config",
            "evaluation_interval", "evaluation_duration", "evaluation_duration_unit")


def rllib_settings(config: Any) -> dict[str, Any]:
    """What the algorithm trains with, as RLlib's AlgorithmConfig names it."""
    settings: dict[str, Any] = {"algorithm": type(config).__name__.removesuffix("Config")}
    for name in SETTINGS:
        if hasattr(config, name):
            settings[name] = plain(getattr(config, name))
    return settings


def updates_per_env_step(config: Any) -> float:
    """RLlib's SAC updates per env step: `training_intensity` (env steps trained on per
    env step sampled) over the batch size; without it, one update per rollout fragment
    of every env (RLlib's "native ratio")."""
    batch = config.total_train_batch_size
    if config.training_intensity:
        return float(config.training_intensity) / batch
    fragment = config.get_rollout_fragment_length()
    return 1.0 / (fragment * config.num_envs_per_env_runner * max(config.num_env_runners, 1))


def hidden_sizes(config: Any) -> list[int] | None:
    sizes = config.model_config.get("fcnet_hiddens")
    return [int(n) for n in sizes] if sizes else None


def sac_options(config: Any) -> dict[str, Any]:
    """RLlib's SAC temperature and target entropy as rltrain's `sac:` options (RLlib
    always learns the temperature, from `initial_alpha`)."""
    alpha = float(config.initial_alpha)
    target = config.target_entropy
    return {"ent_coef": "auto" if alpha == 1.0 else f"auto_{alpha:g}",
            "target_entropy": "auto" if target in (None, "auto") else float(target),
            "target_update_interval": max(int(config.target_network_update_freq or 1), 1)}


def rllib_config(config: Any, env_name: str) -> dict[str, Any]:
    """The algorithm's settings as rltrain config keys (what the checks compare against)."""
    learning_starts = int(config.num_steps_sampled_before_learning_starts)
    capacity = (config.replay_buffer_config or {}).get("capacity")
    widths = hidden_sizes(config)
    derived: dict[str, Any] = {
        "algo": "sac", "env_name": env_name, "seed": int(config.seed or 0),
        "gamma": float(config.gamma), "tau": float(config.tau),
        "batch_size": int(config.total_train_batch_size),
        "learning_starts": learning_starts,
        # each env runner's env is one of rltrain's training envs
        "num_envs": max(int(config.num_env_runners), 1) * int(config.num_envs_per_env_runner),
        "actor_lr": float(config.actor_lr), "critic_lr": float(config.critic_lr),
        # rltrain counts whole updates per env step: a fraction is recorded as 1 (the
        # exact figures are library.training_intensity and the batch size)
        "utd_ratio": max(round(updates_per_env_step(config)), 1),
        "networks": {"actor": {"hidden_sizes": widths}, "critic": {"hidden_sizes": widths}},
        "sac": sac_options(config), "library": rllib_settings(config)}
    if capacity:
        derived["replay_buffer_size"] = int(capacity)
    return derived


class RLlibKeys:
    """A finding's `suggested_set` in RLlib SAC's settings (AlgorithmConfig's names)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def translate(self, suggested: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The RLlib settings for `suggested`, and the rltrain keys RLlib has none for."""
        rllib: dict[str, Any] = {}
        missing: list[str] = []
        for key, value in suggested.items():
            if key in SAME_VALUE:
                rllib[SAME_VALUE[key]] = value
            elif key == "replay_buffer_size":
                rllib["replay_buffer_config"] = {"capacity": value}
            elif key == "hidden_sizes":
                rllib["model_config"] = {"fcnet_hiddens": list(value)}
            elif key == "grad_clip_norm":
                rllib.update(grad_clip=value, grad_clip_by="global_norm")
            elif key == "utd_ratio":  # env steps trained on per env step sampled
                rllib["training_intensity"] = float(value) * self.batch_size
            elif key == "sac.ent_coef" and str(value).startswith("auto_"):
                rllib["initial_alpha"] = float(str(value).removeprefix("auto_"))
            else:
                missing.append(key)
        return rllib, missing

    def finding(self, finding: Finding) -> Finding:
        """`finding` with its fix in RLlib's settings (its message says what has none)."""
        if not finding.suggested_set:
            return finding
        return translated(finding, "RLlib", *self.translate(finding.suggested_set))
