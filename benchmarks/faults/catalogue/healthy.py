"""The healthy runs: every env with at least two algorithms, tuned settings (RL Zoo's
entries shipped in configs/, or rltrain's defaults where RL Zoo has none), and the plain
loop of benchmarks/faults/loop.py with no fault; SB3's PPO, A2C and DQN on RL Zoo's
settings (benchmarks/faults/sb3_runs.py). Each run's budget is its cases' too."""

from __future__ import annotations

from benchmarks.faults.case_types import Healthy

PENDULUM, LOOP, MOUNTAINCAR, LUNARLANDER = 6000, 6000, 10000, 10000
MUJOCO = 10000
# SAC's healthy runs moved by up to 3.4x in final return between seeds 0 and 1
# (LunarLander -172 and -51, InvertedPendulum 68 and 160, Pendulum -546 and -191,
# HalfCheetah -190 and -109, Hopper 234 and 317): two seeds each, so
# that one seed's luck is not the yardstick of "a real fault" nor of a false alarm
SAC_SEEDS = 2
# SB3's PPO, A2C and DQN: RL Zoo trains these for 5e4-1e6 steps; these budgets are where
# their healthy runs have clearly started to learn
CARTPOLE, PPO_PENDULUM, LUNARLANDER_SB3, MOUNTAINCAR_DQN = 40000, 40000, 100000, 120000

HEALTHY = (
    Healthy("pendulum_ddpg", "ddpg", "Pendulum-v1", PENDULUM),
    Healthy("pendulum_td3", "td3", "Pendulum-v1", PENDULUM),
    Healthy("pendulum_sac", "sac", "Pendulum-v1", PENDULUM, seeds=SAC_SEEDS),
    # Pendulum's reward reported as its terms, at their true weights
    Healthy("pendulum_terms_ddpg", "ddpg", "Pendulum-v1", PENDULUM,
            env_fault={"fault": "reward_terms"}),
    Healthy("mountaincar_td3", "td3", "MountainCarContinuous-v0", MOUNTAINCAR),
    Healthy("mountaincar_sac", "sac", "MountainCarContinuous-v0", MOUNTAINCAR,
            seeds=SAC_SEEDS),
    Healthy("lunarlander_td3", "td3", "LunarLanderContinuous-v3", LUNARLANDER),
    Healthy("lunarlander_sac", "sac", "LunarLanderContinuous-v3", LUNARLANDER,
            seeds=SAC_SEEDS),
    Healthy("invertedpendulum_td3", "td3", "InvertedPendulum-v5", MUJOCO, config="defaults"),
    Healthy("invertedpendulum_sac", "sac", "InvertedPendulum-v5", MUJOCO, config="defaults",
            seeds=SAC_SEEDS),
    Healthy("hopper_td3", "td3", "Hopper-v5", MUJOCO),
    Healthy("hopper_sac", "sac", "Hopper-v5", MUJOCO, seeds=SAC_SEEDS),
    Healthy("halfcheetah_td3", "td3", "HalfCheetah-v5", MUJOCO),
    Healthy("halfcheetah_sac", "sac", "HalfCheetah-v5", MUJOCO, seeds=SAC_SEEDS),
    Healthy("loop_pendulum", "loop", "Pendulum-v1", LOOP),
    Healthy("loop_invertedpendulum", "loop", "InvertedPendulum-v5", LOOP),
    Healthy("ppo_cartpole", "sb3_ppo", "CartPole-v1", CARTPOLE),
    Healthy("ppo_pendulum", "sb3_ppo", "Pendulum-v1", PPO_PENDULUM),
    Healthy("ppo_lunarlander", "sb3_ppo", "LunarLander-v3", LUNARLANDER_SB3),
    Healthy("a2c_cartpole", "sb3_a2c", "CartPole-v1", CARTPOLE),
    Healthy("a2c_lunarlander", "sb3_a2c", "LunarLander-v3", LUNARLANDER_SB3),
    Healthy("dqn_cartpole", "sb3_dqn", "CartPole-v1", CARTPOLE),
    Healthy("dqn_lunarlander", "sb3_dqn", "LunarLander-v3", LUNARLANDER_SB3 // 2),
    Healthy("dqn_mountaincar", "sb3_dqn", "MountainCar-v0", MOUNTAINCAR_DQN),
    Healthy("ppo_mountaincar", "sb3_ppo", "MountainCar-v0", MOUNTAINCAR_DQN),
)
