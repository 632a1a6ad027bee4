"""The reward: its scale, its shape, its terms, its noise."""

from __future__ import annotations

from benchmarks.faults.case_types import Case
from benchmarks.faults.catalogue.hyperparameters import LR_RULES

CASES = (
    Case("reward_too_small", "MorvanZhou/Reinforcement-learning-with-tensorflow#2 "
         "(Pendulum breaks without its reward rescaling)", "reward", "pendulum_ddpg",
         ("reward_scale",), "normalize.rewards", "set",
         env_fault={"fault": "reward_scale", "factor": 1e-4}),
    Case("reward_too_large", "Unity-Technologies/ml-agents#481 (keep rewards in a similar "
         "range)", "reward", "pendulum_td3", ("reward_scale",) + LR_RULES,
         "normalize.rewards", "set", env_fault={"fault": "reward_scale", "factor": 1e3}),
    Case("sparse_reward", "rail-berkeley/rlkit#97 (a reward given only at the goal)",
         "reward", "pendulum_ddpg", ("sparse_reward",),
         env_fault={"fault": "sparse_reward"}),
    # Pendulum's own control weight is 0.001: at 300, random actions pay ~80x the angle
    # and velocity costs, and the agent learns not to swing up.
    Case("control_cost_dominates", "related: Unity-Technologies/ml-agents#2798 (an agent "
         "that 'prefers to chill and take penalties'); matheusportela/Multiagent-RL#28 (a "
         "penalty so high the agent turns conservative); openai/gym#2085 (what MuJoCo's "
         "control and contact costs are for)", "reward", "pendulum_terms_ddpg",
         ("reward_terms",), "env_kwargs.ctrl_cost_weight", "down",
         env_fault={"fault": "reward_terms", "ctrl_cost_weight": 300.0}),
    Case("reward_noise_pendulum_td3",
         "'Reinforcement Learning with Perturbed Rewards' (Wang, Liu, Li; "
         "AAAI 2020)", "reward", "pendulum_td3",
         ("critic_fit", "partial_observability"),
         env_fault={"fault": "reward_noise", "std": 10.0}),
    Case("reward_clipped_pendulum_sac",
         "'Learning values across many orders of magnitude' (van Hasselt et "
         "al.: clipped rewards change behaviour); datascience.stackexchange "
         "'What are the effects of clipping the reward in stability?'", "reward", "pendulum_sac",
         ("sparse_reward",), env_fault={"fault": "reward_clip", "low": -1.0, "high": 1.0}),
    Case("alive_bonus_dominates_hopper_sac",
         "modestyachts/ARS#8 (Hopper's survival bonus subtracted to avoid a "
         "local optimum); 'Simple random search provides a competitive "
         "approach to reinforcement learning' (Mania et al.)", "reward", "hopper_sac",
         ("reward_terms",), "env_kwargs.healthy_reward", "down",
         sets={"env_kwargs": {"healthy_reward": 20.0}}),
    Case("control_cost_dominates_halfcheetah_td3",
         "related: reiniscimurs/DRL-robot-navigation#2 (the robot turns on "
         "the spot: doing nothing beats negative rewards); for "
         "ctrl_cost_weight itself: none found yet", "reward", "halfcheetah_td3",
         ("reward_terms",), "env_kwargs.ctrl_cost_weight", "down",
         sets={"env_kwargs": {"ctrl_cost_weight": 10.0}}),
    Case("reward_too_small_lunarlander_sac",
         "higgsfield-ai/higgsfield#5 (SAC is sensitive to the reward's "
         "magnitude, which acts as its temperature); 'Deep Reinforcement "
         "Learning that Matters' (reward scale)", "reward", "lunarlander_sac",
         ("reward_scale",), "normalize.rewards", "set",
         env_fault={"fault": "reward_scale", "factor": 1e-4}),
    Case("reward_too_large_hopper_td3",
         "haarnoja/sac#9 (weights go NaN with too high a reward scale); "
         "'Deep Reinforcement Learning that Matters' (reward scaling)", "reward", "hopper_td3",
         ("reward_scale",) + LR_RULES, "normalize.rewards", "set",
         env_fault={"fault": "reward_scale", "factor": 1e3}),
)
