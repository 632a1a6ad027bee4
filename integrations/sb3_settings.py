"""A Stable-Baselines3 model's settings in SB3's own names, both ways.

`sb3_settings` records what the model trains with as its constructor names it
(`learning_rate`, `buffer_size`, `train_freq`, `action_noise`, `policy_kwargs`, ...):
config.yaml keeps it under `library`, beside the rltrain keys the rules judge with.
`SB3Keys` turns a finding's `suggested_set` (rltrain's keys) into the SB3 arguments
that make the change, and says so in the message where SB3 has none. This module reads
the model's attributes only and imports nothing of SB3.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rltrain.agents.registry import ALGORITHMS
from rltrain.integrations.library_keys import plain, translated
from rltrain.utils.hooks.findings import Finding

# rltrain's key -> SB3's constructor argument, where the value carries over as it is; an
# algorithm's own options by the names its registry entry gives them (`own_options`).
SAME_VALUE = {"gamma": "gamma", "tau": "tau", "batch_size": "batch_size",
              "learning_starts": "learning_starts", "replay_buffer_size": "buffer_size"}


def own_options() -> dict[str, str]:
    """Every algorithm's option (rltrain's dotted key) -> SB3's argument for it, a
    constructor argument or `policy_kwargs.<name>` (agents/registry.py)."""
    return {key: library for entry in ALGORITHMS.values()
            for library, key in entry.library_names().items()}
LEARNING_RATES = ("actor_lr", "critic_lr")  # SB3 has one learning_rate for both
# rltrain's normalisation keys -> VecNormalize's arguments, under RL Zoo's `normalize`
# hyperparameter (SB3 normalises in a VecNormalize wrapper around the env, no argument
# of the model: RL Zoo's `normalize: "dict(norm_obs=..., norm_reward=...)"` makes it)
NORMALIZE = {"normalize.observations": "norm_obs", "normalize.rewards": "norm_reward"}
# SB3's constructor arguments recorded in config.yaml's `library`, where the model has
# them (PPO's, A2C's, DQN's); the rules that judge those families propose changes in
# these names, which carry over as they are.
ARGUMENTS = ("n_steps", "batch_size", "n_epochs", "gae_lambda", "clip_range", "clip_range_vf",
             "normalize_advantage", "ent_coef", "vf_coef", "max_grad_norm", "target_kl",
             "use_rms_prop", "rms_prop_eps", "use_sde", "sde_sample_freq", "buffer_size",
             "learning_starts", "tau", "gradient_steps", "target_update_interval",
             "exploration_fraction", "exploration_initial_eps", "exploration_final_eps",
             "optimize_memory_usage", "train_freq")


def action_noise(noise: Any) -> dict[str, Any] | None:
    """SB3's action noise (possibly vectorised) as its class and parameters."""
    if noise is None:
        return None
    base = getattr(noise, "base_noise", noise)  # VectorizedActionNoise
    fields = {name.lstrip("_"): plain(value) for name, value in vars(base).items()
              if name in ("_mu", "_sigma", "_theta", "_dt")}
    return {"type": type(base).__name__, **fields}


def learning_rate(model: Any) -> Any:
    """A float, or the schedule's name with its value at the start of training."""
    if isinstance(model.learning_rate, (int, float)):
        return float(model.learning_rate)
    return {"schedule": plain(model.learning_rate), "start": float(model.lr_schedule(1.0))}


def network_arch(model: Any) -> tuple[list[int], list[int]]:
    """The actor's and the critic's hidden widths (SB3's `net_arch`, a list or pi/qf)."""
    arch = getattr(model.policy, "net_arch", None) or []
    if isinstance(arch, dict):
        return list(arch.get("pi", [])), list(arch.get("qf", []))
    return list(arch), list(arch)


def sb3_settings(model: Any) -> dict[str, Any]:
    """What the model trains with, as SB3's constructor names it."""
    settings: dict[str, Any] = {
        "algorithm": type(model).__name__, "learning_rate": learning_rate(model),
        "buffer_size": model.buffer_size, "learning_starts": model.learning_starts,
        "batch_size": model.batch_size, "tau": model.tau, "gamma": model.gamma,
        "train_freq": [model.train_freq.frequency, model.train_freq.unit.value],
        "gradient_steps": model.gradient_steps, "action_noise": action_noise(model.action_noise),
        "optimize_memory_usage": model.optimize_memory_usage,
        "policy_kwargs": plain({**model.policy_kwargs,
                                "net_arch": plain(getattr(model.policy, "net_arch", None))}),
        "n_envs": model.n_envs, "seed": model.seed, "device": str(model.device)}
    arguments = {library for entry in ALGORITHMS.values() for library in entry.library_names()
                 if not library.startswith("policy_kwargs.")}
    for name in sorted(arguments - {"target_entropy"}) + ["use_sde"]:
        if hasattr(model, name):
            settings[name] = plain(getattr(model, name))
    if hasattr(model, "target_entropy"):
        settings["target_entropy"] = plain(model.target_entropy)
    return settings


def updates_per_env_step(model: Any) -> float:
    """SB3's gradient steps per env step (one env's transition, rltrain's unit): it runs
    `gradient_steps` (-1: one per transition collected) after every `train_freq` steps
    of all its envs."""
    if model.gradient_steps < 0 or model.train_freq.unit.value != "step":
        return 1.0
    return model.gradient_steps / (model.train_freq.frequency * model.n_envs)


def _put_argument(sb3: dict[str, Any], name: str, value: Any) -> None:
    """`value` under SB3's argument `name` (`policy_kwargs.<name>`: in that dict)."""
    if name.startswith("policy_kwargs."):
        sb3.setdefault("policy_kwargs", {})[name.partition(".")[2]] = value
    else:
        sb3[name] = value


class SB3Keys:
    """A finding's `suggested_set` in SB3's constructor arguments for one model."""

    def __init__(self, model: Any) -> None:
        # PPO and A2C have no train_freq: they update after each rollout
        self.n_envs, self.train_freq = model.n_envs, getattr(model, "train_freq", None)
        self.action_dim = int(np.prod(model.action_space.shape))
        # SB3's own names, where a rule proposes one (PPO's ent_coef, DQN's
        # target_update_interval): the model's arguments and its learning_rate
        self.own_names = {name for name in (*ARGUMENTS, "learning_rate")
                          if hasattr(model, name)}

    def translate(self, suggested: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The SB3 arguments for `suggested`, and the rltrain keys SB3 has no setting for."""
        sb3: dict[str, Any] = {}
        missing: list[str] = []
        own = own_options()
        rates = [v for k, v in suggested.items() if k in LEARNING_RATES]
        if rates:
            sb3["learning_rate"] = min(rates)  # the careful one, for both networks
        for key, value in suggested.items():
            if key in LEARNING_RATES:
                continue
            if key in self.own_names and key not in SAME_VALUE:
                sb3[key] = value
            elif key in SAME_VALUE:
                sb3[SAME_VALUE[key]] = value
            elif key in own:
                _put_argument(sb3, own[key], value)
            elif key == "exploration_noise":
                sb3["action_noise"] = {"type": "NormalActionNoise", "sigma": value}
            elif key in NORMALIZE:  # VecNormalize's switch, as RL Zoo's `normalize` sets it
                sb3.setdefault("normalize", {})[NORMALIZE[key]] = bool(value)
            elif key == "hidden_sizes":
                sb3.setdefault("policy_kwargs", {})["net_arch"] = list(value)
            elif (key == "utd_ratio" and self.train_freq is not None
                  and self.train_freq.unit.value == "step"):
                sb3["gradient_steps"] = int(value) * self.train_freq.frequency * self.n_envs
            else:
                missing.append(key)
        if "noise_type" in missing and suggested.get("noise_type") == "ou":
            missing.remove("noise_type")
            noise = sb3.setdefault("action_noise", {})
            noise["type"] = "OrnsteinUhlenbeckActionNoise"
        return sb3, missing

    def finding(self, finding: Finding) -> Finding:
        """`finding` with its fix in SB3's arguments (its message says what has none)."""
        if not finding.suggested_set:
            return finding
        sb3, missing = self.translate(finding.suggested_set)
        both = ("; SB3's one learning_rate is both networks'" if "learning_rate" in sb3
                and not all(k in finding.suggested_set for k in LEARNING_RATES) else "")
        return translated(finding, "SB3", sb3, missing, both)
