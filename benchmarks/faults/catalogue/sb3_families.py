"""Faults of the PPO, A2C and DQN families: SB3 runs on RL Zoo's settings
(benchmarks/faults/sb3_runs.py) with one setting or the env changed as users reported.
`sets` and the right `key` are SB3's own names (VecNormalize's, under RL Zoo's
`normalize`, where the fix is normalisation, which SB3 sets outside the model)."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

# The rules that name a rate set far too high in these families.
LR_RULES = ("policy_step_size", "policy_entropy_collapse", "critic_loss_explosion",
            "q_beyond_returns", "q_explosion", "grad_explosion")
# Normalisation in rltrain's keys, or as SB3 has it proposed: RL Zoo's `normalize`
# (VecNormalize's arguments), integrations/sb3_settings.py
REWARDS_NORMALISED = "normalize.rewards|normalize.norm_reward"
OBSERVATIONS_NORMALISED = "normalize.observations|normalize.norm_obs"
VALUE_RULES = ("value_fit", "critic_loss_explosion", "reward_scale")

CASES = (
    # -- hyperparameters
    Case("ppo_lr_far_too_high_cartpole",
         "Unity-Technologies/ml-agents#1237 (PPO learns, then loses everything: "
         "a learning rate too high)", "hyperparameter", "ppo_cartpole",
         LR_RULES, "learning_rate", "down", sets={"learning_rate": 0.05}),
    Case("ppo_lr_too_high_pendulum",
         "Unity-Technologies/ml-agents#1237 (PPO collapse blamed on a high learning "
         "rate); hill-a/stable-baselines#837 (sudden drop)", "hyperparameter", "ppo_pendulum",
         LR_RULES, "learning_rate", "down", sets={"learning_rate": 0.01}),
    Case("ppo_lr_far_too_low_pendulum",
         "none found for PPO (kengz/SLM-Lab#66: a learning rate too small "
         "for CartPole, in DQN)", "hyperparameter", "ppo_pendulum",
         ("value_fit", "no_learning"), "learning_rate", "up", sets={"learning_rate": 1e-6}),
    Case("ppo_no_clipping_cartpole",
         "none found as a user report; \"You May Not Need Ratio Clipping in PPO\" "
         "(arXiv 2202.00079) on why ratio clipping matters", "hyperparameter", "ppo_cartpole",
         ("policy_step_size",), "clip_range", "down", sets={"clip_range": 100.0}),
    Case("ppo_ent_coef_huge_cartpole",
         "kuds/mesozoic-labs#488 (an entropy bonus left on kept the policy "
         "noisy, below the do-nothing policy); openai/baselines#371", "hyperparameter",
         "ppo_cartpole",
         ("entropy_bonus",), "ent_coef", "down", sets={"ent_coef": 1.0}),
    Case("ppo_gamma_too_low_lunarlander",
         "PaddlePaddle/PARL#957 (gamma 0.9 never reaches the goal; 0.99 "
         "does)", "hyperparameter", "ppo_lunarlander",
         ("short_horizon",), "gamma", "up", sets={"gamma": 0.8}),
    Case("a2c_lr_too_high_cartpole",
         "PacktPublishing/Tensorflow-2-Reinforcement-Learning-Cookbook#12 "
         "(actor-critic learning rate 1e-1: NaN outputs); rlcode/reinforcement-learning#58",
         "hyperparameter", "a2c_cartpole",
         LR_RULES, "learning_rate", "down", sets={"learning_rate": 0.01}),
    Case("a2c_ent_coef_huge_lunarlander",
         "kuds/mesozoic-labs#488; openai/baselines#371 (PPO2 policy entropy "
         "grows over time)", "hyperparameter", "a2c_lunarlander",
         ("entropy_bonus",), "ent_coef", "down", sets={"ent_coef": 1.0}),
    Case("dqn_lr_far_too_high_cartpole",
         "Albert-Z-Guo/Deep-Reinforcement-Stock-Trading#5 (DQN loss in the "
         "millions, mended by a lower learning rate); muupan/dqn-in-the-caffe#6",
         "hyperparameter", "dqn_cartpole",
         LR_RULES, "learning_rate", "down", sets={"learning_rate": 0.1}),
    Case("dqn_exploration_over_too_soon_mountaincar",
         "tensorflow/agents#686 (DQN MountainCar stays at -200: "
         "epsilon-greedy exploration too little); vwxyzjn/cleanrl#255", "hyperparameter",
         "dqn_mountaincar", ("exploration_schedule",), "exploration_fraction", "up",
         sets={"exploration_fraction": 0.001, "exploration_final_eps": 0.0}, seeds=2),
    # -- data pipeline: rollouts, buffer, update schedule
    Case("ppo_rollouts_too_short_lunarlander",
         "DLR-RM/stable-baselines3#1059 (rollouts shorter than the "
         "episodes); DLR-RM/stable-baselines3#668", "data", "ppo_lunarlander",
         ("short_rollouts",), "n_steps", "up", sets={"n_steps": 4}),
    Case("dqn_target_every_update_cartpole",
         "reiniscimurs/DRL-robot-navigation#76 (target copied every "
         "second update: unstable, learning may fail)", "data", "dqn_cartpole",
         ("q_beyond_returns", "q_explosion", "critic_loss_explosion"),
         "target_update_interval", "up",
         sets={"train_freq": 1, "gradient_steps": 1, "target_update_interval": 1}),
    Case("dqn_target_sync_too_rare_cartpole",
         "anthonytorlucci/rlevo#337 (a target hard-synced every 10,000 steps, SB3's "
         "Atari-scale default, updates a 30k-step CartPole run's target 3 times); "
         "keras-rl/keras-rl#55 (the target update period's huge effect on learning)",
         "data", "dqn_cartpole", ("target_update",), "target_update_interval", "down",
         sets={"target_update_interval": 10_000}, seeds=2),
    Case("dqn_buffer_tiny_lunarlander",
         "DLR-RM/stable-baselines3#214 (DQN does not converge: raise the "
         "buffer to 1e5-1e6); Zhang & Sutton 2017, \"A Deeper Look at Experience Replay\"",
         "data", "dqn_lunarlander",
         ("small_replay",), "buffer_size", "up", sets={"buffer_size": 500}),
    Case("dqn_learning_starts_beyond_budget_cartpole",
         "DLR-RM/stable-baselines3#526 (total_timesteps "
         "below learning_starts: no learning happens)", "data", "dqn_cartpole",
         ("learning_not_started",), "learning_starts", "down",
         sets={"learning_starts": 100_000}),
    Case("dqn_train_freq_rare_lunarlander",
         "related: hill-a/stable-baselines#754 (train_freq above the "
         "timesteps of a learn() call: the policy is never updated)", "data", "dqn_lunarlander",
         ("update_schedule",), "train_freq", "down",
         sets={"train_freq": 2000, "gradient_steps": 1}),
    # -- reward, observation, episodes
    Case("ppo_reward_x1000_cartpole",
         "vwxyzjn/cleanrl#441 (large rewards: the value loss dwarfs the "
         "policy loss, unstable; scaling the reward mends it)", "reward",
         "ppo_cartpole", VALUE_RULES,
         REWARDS_NORMALISED, "set", env_fault={"fault": "reward_scale", "factor": 1000.0}),
    Case("a2c_reward_x1000_lunarlander",
         "vwxyzjn/cleanrl#441; deepspeedai/DeepSpeedExamples#556 (critic "
         "loss grows with the return scale)", "reward", "a2c_lunarlander",
         VALUE_RULES, REWARDS_NORMALISED, "set",
         env_fault={"fault": "reward_scale", "factor": 1000.0}),
    Case("dqn_reward_x1e-4_cartpole",
         "lcswillems/rl-starter-files#30 (rewards of 0.001-0.02 do not "
         "converge; x10 does)", "reward", "dqn_cartpole", ("reward_scale",),
         "", "", env_fault={"fault": "reward_scale", "factor": 1e-4}),
    Case("ppo_observation_x1000_pendulum",
         "openai/baselines#1030 (PPO2 needs observation normalisation "
         "to learn); Unity-Technologies/ml-agents#5583", "observation", "ppo_pendulum",
         ("observation_scale",), OBSERVATIONS_NORMALISED, "set",
         env_fault={"fault": "observation_scale", "factor": 1000.0}),
    Case("ppo_time_limit_terminal_cartpole",
         "vwxyzjn/cleanrl#198 (PPO without bootstrapping at the time "
         "limit stuck in a suboptimum); DLR-RM/stable-baselines3#633", "episode", "ppo_cartpole",
         ("time_limit_terminal",), "", "", env_fault={"fault": "time_limit_terminal"}),
    Case("dqn_timeouts_not_handled_mountaincar",
         "DLR-RM/stable-baselines3#934 and #948 (optimize_memory_usage needs "
         "handle_timeout_termination off); DLR-RM/rl-baselines3-zoo#270", "episode",
         "dqn_mountaincar", ("time_limit_terminal",), "", "",
         sets={"replay_buffer_kwargs": {"handle_timeout_termination": False}}),
    Case("dqn_stale_observation_cartpole",
         "none found yet (an env whose step returns a stale copy of its "
         "observation)", "observation", "dqn_cartpole",
         ("frozen_observation",), "", "", env_fault={"fault": "stale_observation"}),
)
