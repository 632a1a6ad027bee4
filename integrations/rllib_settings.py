"""RLlib's AlgorithmConfig (SAC, PPO, DQN) in rltrain's config keys and in RLlib's own
names.

`rllib_settings` records what the algorithm trains with as its AlgorithmConfig names it
(`train_batch_size_per_learner`, `num_steps_sampled_before_learning_starts`,
`replay_buffer_config`, `model_config`, PPO's `clip_param`, DQN's `epsilon`, ...):
config.yaml keeps it under `library`, beside the rltrain keys the rules judge with
(`rllib_config`). The rules of PPO's and DQN's families read their settings from
`library` under SB3's names, for which they were written (utils/diagnosis/rules/
on_policy_rules.py, q_learning_rules.py: `ent_coef`, `n_epochs`, `clip_range`,
`exploration_final_eps`, ...): where RLlib names such a setting otherwise,
`rule_settings` records RLlib's value under the rules' name too (`RULE_NAMES`), and
`RLlibKeys` (integrations/rllib_keys.py) turns their fixes back into RLlib's settings.
`check_algorithm` says what the callback cannot watch. This module reads the config's
attributes only and imports nothing of Ray.
"""

from __future__ import annotations

from typing import Any

from rltrain.integrations.library_keys import plain
from rltrain.utils.errors import ConfigError

# RLlib's algorithm (its class name) -> the registry entry its runs are recorded under
WATCHED = {"SAC": "sac", "PPO": "ppo", "DQN": "dqn"}
# RLlib's settings recorded under config.yaml's `library`, in RLlib's names: every
# algorithm's, then each one's own.
COMMON = ("gamma", "lr", "train_batch_size_per_learner", "model_config", "num_env_runners",
          "num_envs_per_env_runner", "rollout_fragment_length", "num_learners", "grad_clip",
          "grad_clip_by", "log_gradients", "seed", "env", "env_config",
          "evaluation_interval", "evaluation_duration", "evaluation_duration_unit")
OWN = {
    "SAC": ("tau", "actor_lr", "critic_lr", "alpha_lr", "initial_alpha", "target_entropy",
            "twin_q", "n_step", "num_steps_sampled_before_learning_starts",
            "replay_buffer_config", "training_intensity", "target_network_update_freq",
            "normalize_actions", "clip_actions"),
    "PPO": ("minibatch_size", "num_epochs", "shuffle_batch_per_epoch", "lambda_",
            "use_critic", "use_gae", "use_kl_loss", "kl_coeff", "kl_target",
            "vf_loss_coeff", "entropy_coeff", "clip_param", "vf_clip_param"),
    "DQN": ("tau", "target_network_update_freq", "double_q", "dueling", "n_step",
            "num_atoms", "noisy", "td_error_loss_fn",
            "num_steps_sampled_before_learning_starts", "replay_buffer_config",
            "training_intensity"),
}
# The rules' name (SB3's) -> RLlib's setting of the same meaning and value, where they
# differ; DQN's epsilon schedule is recorded as SB3's three exploration settings.
RULE_NAMES = {
    "SAC": {},
    "PPO": {"learning_rate": "lr", "ent_coef": "entropy_coeff", "n_epochs": "num_epochs",
            "clip_range": "clip_param", "vf_coef": "vf_loss_coeff"},
    "DQN": {"learning_rate": "lr", "target_update_interval": "target_network_update_freq"},
}
# RLlib's fcnet_activation -> rltrain's name for it (others, "linear", are not recorded)
ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "elu": "elu", "gelu": "gelu"}
# What RLlib's models take where `model_config` leaves it out (DefaultModelConfig)
DEFAULT_MODEL = {"fcnet_hiddens": [256, 256], "fcnet_activation": "tanh"}


def check_algorithm(algorithm: Any) -> str:
    """The algorithm's name: RLlib's SAC, PPO or DQN, single-agent, with its learner in
    this process, one env per env runner and a feed-forward RLModule; anything else is a
    ConfigError naming what to change."""
    config, name = algorithm.config, type(algorithm).__name__
    if name not in WATCHED:
        *others, last = WATCHED
        raise ConfigError(f"the rltrain callback watches RLlib's {', '.join(others)} and "
                          f"{last}, not {name}")
    if getattr(config, "is_multi_agent", False):
        raise ConfigError("the rltrain callback watches a single-agent algorithm: leave "
                          "multi_agent() out")
    if config.num_learners or not algorithm.learner_group.is_local:
        raise ConfigError("the rltrain callback needs RLlib's learner in this process: "
                          f"set learners(num_learners=0), not {config.num_learners}")
    if config.num_envs_per_env_runner != 1:
        raise ConfigError("the rltrain callback watches one env: set env_runners("
                          f"num_envs_per_env_runner=1), not {config.num_envs_per_env_runner}")
    for memory in ("use_lstm", "use_attention"):
        if config.model_config.get(memory):
            raise ConfigError(f"the rltrain callback watches a feed-forward RLModule: set "
                              f"rl_module(model_config={{'{memory}': False}}), not True")
    return name


def scheduled(value: Any) -> Any:
    """A setting RLlib takes as a value or a schedule ([[timestep, value], ...]): the
    value, or the schedule with its value at the start (what `library_setting` reads)."""
    if isinstance(value, (list, tuple)):
        return {"schedule": plain(value), "start": float(value[0][1])}
    return plain(value)


def at_start(value: Any) -> float:
    """A value or a schedule's value at the start."""
    return float(value[0][1]) if isinstance(value, (list, tuple)) else float(value)


def epsilon_schedule(config: Any) -> Any:
    """DQN's epsilon as its RLModule gets it (`model_config` may override `epsilon`)."""
    return config.model_config.get("epsilon", config.epsilon)


def exploration(config: Any, total_timesteps: int) -> dict[str, float]:
    """DQN's epsilon schedule as SB3's exploration settings, which the rules read: its
    first and last values, and the share of the run's env steps it takes to reach the
    last (RLlib steps it by the env steps sampled)."""
    schedule = epsilon_schedule(config)
    if not isinstance(schedule, (list, tuple)):
        return {"exploration_initial_eps": float(schedule),
                "exploration_final_eps": float(schedule), "exploration_fraction": 0.0}
    return {"exploration_initial_eps": float(schedule[0][1]),
            "exploration_final_eps": float(schedule[-1][1]),
            "exploration_fraction": float(schedule[-1][0]) / max(total_timesteps, 1)}


def rllib_settings(config: Any, name: str) -> dict[str, Any]:
    """What algorithm `name` trains with, as RLlib's AlgorithmConfig names it."""
    settings: dict[str, Any] = {"algorithm": name}
    for setting in COMMON + OWN[name]:
        if hasattr(config, setting):
            settings[setting] = plain(getattr(config, setting))
    if name == "DQN":
        settings["epsilon"] = plain(epsilon_schedule(config))
    return settings


def rule_settings(config: Any, name: str, total_timesteps: int) -> dict[str, Any]:
    """RLlib's settings under the names the rules of the algorithm's family read them."""
    settings = {rule: scheduled(getattr(config, setting))
                for rule, setting in RULE_NAMES[name].items()}
    if name == "PPO":  # each env's steps per rollout (an iteration samples the batch)
        settings["n_steps"] = int(config.total_train_batch_size) // num_envs(config)
    if name == "DQN":
        settings.update(exploration(config, total_timesteps))
    return settings


def num_envs(config: Any) -> int:
    """rltrain's training envs: each env runner's env is one."""
    return max(int(config.num_env_runners), 1) * int(config.num_envs_per_env_runner)


def updates_per_env_step(config: Any) -> float:
    """RLlib's SAC and DQN updates per env step: `training_intensity` (env steps trained
    on per env step sampled) over the batch size; without it, one update per rollout
    fragment of every env (RLlib's "native ratio")."""
    batch = config.total_train_batch_size
    if config.training_intensity:
        return float(config.training_intensity) / batch
    fragment = config.get_rollout_fragment_length()
    return 1.0 / (fragment * config.num_envs_per_env_runner * max(config.num_env_runners, 1))


def hidden_sizes(config: Any) -> list[int] | None:
    sizes = config.model_config.get("fcnet_hiddens")
    return [int(n) for n in sizes] if sizes else None


def network(config: Any) -> dict[str, Any]:
    """The encoder's widths and activation, as rltrain's `networks.<net>`."""
    model = {**DEFAULT_MODEL, **config.model_config}
    activation = ACTIVATIONS.get(str(model["fcnet_activation"]))
    return {"hidden_sizes": [int(n) for n in model["fcnet_hiddens"]],
            **({"activation": activation} if activation else {})}


def sac_options(config: Any) -> dict[str, Any]:
    """RLlib's SAC temperature and target entropy as rltrain's `sac:` options (RLlib
    always learns the temperature, from `initial_alpha`)."""
    alpha = float(config.initial_alpha)
    target = config.target_entropy
    return {"ent_coef": "auto" if alpha == 1.0 else f"auto_{alpha:g}",
            "target_entropy": "auto" if target in (None, "auto") else float(target),
            "target_update_interval": max(int(config.target_network_update_freq or 1), 1)}


def _replayed(config: Any) -> dict[str, Any]:
    """SAC's and DQN's replay: its keys as rltrain's."""
    capacity = (config.replay_buffer_config or {}).get("capacity")
    derived: dict[str, Any] = {
        "tau": float(config.tau), "batch_size": int(config.total_train_batch_size),
        "learning_starts": int(config.num_steps_sampled_before_learning_starts),
        # rltrain counts whole updates per env step: a fraction is recorded as 1 (the
        # exact figures are library.training_intensity and the batch size)
        "utd_ratio": max(round(updates_per_env_step(config)), 1)}
    if capacity:
        derived["replay_buffer_size"] = int(capacity)
    return derived


def _own_keys(config: Any, name: str) -> dict[str, Any]:
    """The rltrain keys each algorithm sets its own way."""
    if name == "SAC":
        widths = hidden_sizes(config)
        return {**_replayed(config), "actor_lr": float(config.actor_lr),
                "critic_lr": float(config.critic_lr), "sac": sac_options(config),
                "networks": {"actor": {"hidden_sizes": widths},
                             "critic": {"hidden_sizes": widths}}}
    rate = at_start(config.lr)  # one optimiser for the policy and its value
    if name == "DQN":
        return {**_replayed(config), "actor_lr": rate, "critic_lr": rate,
                "networks": {"actor": {"hidden_sizes": None}, "critic": network(config)}}
    rollout = int(config.total_train_batch_size)
    # the minibatch a PPO step takes; what a rollout holds stands in for the replay buffer
    return {"batch_size": int(config.minibatch_size or rollout), "learning_starts": 0,
            "replay_buffer_size": rollout, "actor_lr": rate, "critic_lr": rate,
            "networks": {"actor": network(config), "critic": network(config)}}


def rllib_config(config: Any, name: str, env_name: str, total_timesteps: int) -> dict[str, Any]:
    """Algorithm `name`'s settings as rltrain config keys (what the checks compare
    against), for a run of `total_timesteps` env steps."""
    derived: dict[str, Any] = {
        "algo": WATCHED[name], "env_name": env_name, "seed": int(config.seed or 0),
        "gamma": float(config.gamma), "num_envs": num_envs(config),
        **_own_keys(config, name),
        "library": {**rllib_settings(config, name),
                    **rule_settings(config, name, total_timesteps)}}
    derived["max_timesteps"] = max(total_timesteps, derived["learning_starts"] + 1)
    return derived
