"""The fault benchmark's cases: training faults that users reported in public, each
planted in a run, with the rule that should name it and the fix it should propose.

A case is data. `sets` are config keys on a shipped config (`base`); an env fault runs
the env through benchmarks/faults/envs.py (`env_kwargs`); a code fault runs the plain
loop of benchmarks/faults/loop.py with the fault switched on (`loop`). `rules` are the
rules whose warning or pause counts as naming it; `key` and `direction` the
`suggested_set` entry that counts as the right fix ("up" or "down" against the case's
value, "set" for any value, "" where no config key is the fix: the env or the code
must change). `healthy` names the healthy run it is compared with at the same steps.
Each `source` is a public report of the fault (repository and issue number, or title).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FAULTY_ENV = "benchmarks.faults.envs:Faulty-v0"


@dataclass(frozen=True)
class Healthy:
    """A healthy run: a shipped tuned config, to count false alarms on. `env_fault`: the
    env through Faulty-v0 with these kwargs, faultless (Pendulum's reward reported as its
    terms, at their true weights), for the cases of that env."""

    id: str
    algo: str
    env: str
    steps: int
    env_fault: dict[str, Any] | None = None


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    kind: str  # "hyperparameter", "env" or "code"
    healthy: str  # the Healthy run of the same env, algo and budget
    rules: tuple[str, ...]
    key: str = ""
    direction: str = ""
    sets: dict[str, Any] = field(default_factory=dict)
    env_fault: dict[str, Any] | None = None  # Faulty-v0's kwargs besides `base`
    loop: str | None = None  # a fault of loop.py


HEALTHY = (
    Healthy("pendulum_ddpg", "ddpg", "Pendulum-v1", 6000),
    Healthy("pendulum_td3", "td3", "Pendulum-v1", 6000),
    Healthy("pendulum_sac", "sac", "Pendulum-v1", 6000),
    Healthy("mountaincar_td3", "td3", "MountainCarContinuous-v0", 10000),
    Healthy("mountaincar_sac", "sac", "MountainCarContinuous-v0", 10000),
    Healthy("lunarlander_td3", "td3", "LunarLanderContinuous-v3", 10000),
    Healthy("loop_pendulum", "loop", "Pendulum-v1", 6000),  # loop.py with no fault
    Healthy("pendulum_terms_ddpg", "ddpg", "Pendulum-v1", 6000,
            env_fault={"fault": "reward_terms"}),
)

LR_RULES = ("learning_rate", "critic_loss_explosion", "q_explosion", "grad_explosion",
            "q_divergence")

CASES = (
    # --- hyperparameters
    Case("lr_far_too_high", "chauncygu/Multi-Agent-Constrained-Policy-Optimisation#5 "
         "(grad norm explosion at a large critic learning rate); stevenpjg/ddpg-aigym#7",
         "hyperparameter", "pendulum_ddpg", LR_RULES, "critic_lr", "down",
         sets={"actor_lr": 0.1, "critic_lr": 0.1}),
    Case("sac_critic_lr_far_too_high", "rail-berkeley/rlkit#50 (SAC Q loss to 1e19); "
         "DLR-RM/stable-baselines3#1372 (SAC loss diverging)",
         "hyperparameter", "pendulum_sac", LR_RULES, "critic_lr", "down",
         sets={"critic_lr": 0.05}),
    Case("actor_lr_far_too_low", "related: yanpanlau/DDPG-Keras-Torcs#34 (actor and critic "
         "learning rates set apart from the paper's); the fault itself: none found yet",
         "hyperparameter", "pendulum_td3", ("actor_stalled", "learning_rate"), "actor_lr",
         "up", sets={"actor_lr": 3e-8}),
    Case("tau_one", "mimoralea/gdrl#14 (tau ignored in the target update); "
         "xphongvn/rlcomp2020#3 (soft update misapplied)",
         "hyperparameter", "pendulum_ddpg", ("target_update",), "tau", "down",
         sets={"tau": 1.0}),
    Case("no_exploration_noise_mountaincar", "sweetice/Deep-reinforcement-learning-with-"
         "pytorch#3 (DDPG missing exploration noise); DLR-RM/stable-baselines3#936",
         "hyperparameter", "mountaincar_td3", ("no_learning",), "exploration_noise", "up",
         sets={"exploration_noise": 0.0}),
    Case("pendulum_noise_on_mountaincar", "DLR-RM/stable-baselines3#936 (MountainCar with "
         "DDPG and TD3 does not learn); openai/baselines#482 (ou 0.2 does not converge)",
         "hyperparameter", "mountaincar_td3", ("no_learning", "fixated_cluster"),
         "exploration_noise", "up", sets={"exploration_noise": 0.1, "noise_type": "gaussian"}),
    Case("sac_small_fixed_temperature_mountaincar", "rail-berkeley/softlearning#76 (SAC on "
         "MountainCar: the temperature and exploration); rail-berkeley/rlkit#97",
         "hyperparameter", "mountaincar_sac", ("entropy_collapse", "no_learning"),
         "sac.ent_coef", "set", sets={"sac": {"ent_coef": 0.001}}),
    Case("discount_too_close_to_one", "none found yet (RL Zoo's own MountainCar SAC entry "
         "uses gamma 0.9999)", "hyperparameter", "pendulum_ddpg",
         ("long_horizon",), "gamma", "down", sets={"gamma": 0.9999}),
    Case("replay_buffer_too_small", "Unity-Technologies/ml-agents#4132 (SAC buffers too "
         "small: catastrophic forgetting); DLR-RM/stable-baselines3#1885 (the buffer's size "
         "per env)", "hyperparameter", "pendulum_ddpg", ("small_replay",),
         "replay_buffer_size", "up", sets={"replay_buffer_size": 1000}),
    # --- env and reward
    Case("reward_too_small", "MorvanZhou/Reinforcement-learning-with-tensorflow#2 "
         "(Pendulum breaks without its reward rescaling)", "env", "pendulum_ddpg",
         ("reward_scale",), "normalize.rewards", "set",
         env_fault={"fault": "reward_scale", "factor": 1e-4}),
    Case("reward_too_large", "Unity-Technologies/ml-agents#481 (keep rewards in a similar "
         "range)", "env", "pendulum_td3", ("reward_scale",) + LR_RULES, "normalize.rewards",
         "set", env_fault={"fault": "reward_scale", "factor": 1e3}),
    Case("unnormalized_observations", "Unity-Technologies/ml-agents#481 (normalize the "
         "input space)", "env", "pendulum_ddpg", ("observation_scale",),
         "normalize.observations", "set",
         env_fault={"fault": "observation_scale", "factor": 1000.0}),
    Case("time_limit_as_terminal", "openai/gym#3102 (TimeLimit's truncation); "
         "DLR-RM/stable-baselines3#1864; Toni-SM/skrl#363", "env", "pendulum_ddpg",
         ("time_limit_terminal",), env_fault={"fault": "time_limit_terminal"}),
    Case("sparse_reward", "rail-berkeley/rlkit#97 (a reward given only at the goal)",
         "env", "pendulum_ddpg", ("sparse_reward",),
         env_fault={"fault": "sparse_reward"}),
    # Pendulum's own control weight is 0.001: at 300, random actions pay ~80x the angle
    # and velocity costs, and the agent learns not to swing up.
    Case("control_cost_dominates", "related: Unity-Technologies/ml-agents#2798 (an agent "
         "that 'prefers to chill and take penalties'); matheusportela/Multiagent-RL#28 (a "
         "penalty so high the agent turns conservative); openai/gym#2085 (what MuJoCo's "
         "control and contact costs are for)", "env", "pendulum_terms_ddpg",
         ("reward_terms",), "env_kwargs.ctrl_cost_weight", "down",
         env_fault={"fault": "reward_terms", "ctrl_cost_weight": 300.0}),
    Case("ignored_action", "none found yet (an env whose action is never applied)", "env",
         "pendulum_ddpg", ("ignored_action",),
         env_fault={"fault": "ignored_action"}),
    # ignored_action's hypothesis names "an action scaled to nothing": a tenth of the
    # declared torque moves Pendulum too little for its test to tell from chance.
    Case("action_units_too_small", "none found yet (an env in other action units than its "
         "declared bounds)", "env", "pendulum_ddpg", ("action_saturation", "ignored_action"),
         env_fault={"fault": "small_action_units", "factor": 0.1}),
    # --- code faults in a plain loop, watched by the Watcher
    Case("no_zero_grad", "pytorch/pytorch#47175 (forgetting zero_grad); "
         "tenstorrent/tt-blacksmith#711", "code", "loop_pendulum",
         ("gradients_not_zeroed", "grad_explosion", "critic_loss_explosion",
          "learning_rate", "q_divergence"), loop="no_zero_grad"),
    Case("target_never_updated", "kakaoenterprise/JORLDY#120 (missing target actor "
         "update); MorvanZhou/Reinforcement-learning-with-tensorflow#106", "code",
         "loop_pendulum", ("target_update",), loop="frozen_target"),
    Case("done_includes_truncation", "hill-a/stable-baselines#1004 (bootstrapping at the "
         "time limit); openai/spinningup#233", "code", "loop_pendulum",
         ("time_limit_terminal",), loop="done_includes_truncation"),
    Case("actions_not_rescaled", "none found yet (a tanh output sent to the env "
         "unscaled)", "code", "loop_pendulum",
         ("action_range_unused", "action_saturation"), loop="unscaled_actions"),
    Case("actor_loss_steps_the_critic", "related: openai/spinningup#65 (which update runs "
         "first in DDPG); the fault itself: none found yet", "code",
         "loop_pendulum", ("actor_loss_steps_critic", "q_divergence",
                           "value_policy_imbalance", "learning_rate", "critic_loss_explosion",
                           "q_explosion"), loop="actor_steps_critic"),
)


def healthy(name: str) -> Healthy:
    return next(h for h in HEALTHY if h.id == name)
