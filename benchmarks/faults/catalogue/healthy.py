"""The healthy runs: every env with at least two algorithms, tuned settings (RL Zoo's
entries shipped in configs/, or rltrain's defaults where RL Zoo has none), and the plain
loop of benchmarks/faults/loop.py with no fault. Each env's budget is its cases' too."""

from __future__ import annotations

from benchmarks.faults.case_types import Healthy

PENDULUM, LOOP, MOUNTAINCAR, LUNARLANDER = 6000, 6000, 10000, 10000
MUJOCO = 10000

HEALTHY = (
    Healthy("pendulum_ddpg", "ddpg", "Pendulum-v1", PENDULUM),
    Healthy("pendulum_td3", "td3", "Pendulum-v1", PENDULUM),
    Healthy("pendulum_sac", "sac", "Pendulum-v1", PENDULUM),
    # Pendulum's reward reported as its terms, at their true weights
    Healthy("pendulum_terms_ddpg", "ddpg", "Pendulum-v1", PENDULUM,
            env_fault={"fault": "reward_terms"}),
    Healthy("mountaincar_td3", "td3", "MountainCarContinuous-v0", MOUNTAINCAR),
    Healthy("mountaincar_sac", "sac", "MountainCarContinuous-v0", MOUNTAINCAR),
    Healthy("lunarlander_td3", "td3", "LunarLanderContinuous-v3", LUNARLANDER),
    Healthy("lunarlander_sac", "sac", "LunarLanderContinuous-v3", LUNARLANDER),
    Healthy("invertedpendulum_td3", "td3", "InvertedPendulum-v5", MUJOCO, config="defaults"),
    Healthy("invertedpendulum_sac", "sac", "InvertedPendulum-v5", MUJOCO, config="defaults"),
    Healthy("hopper_td3", "td3", "Hopper-v5", MUJOCO),
    Healthy("hopper_sac", "sac", "Hopper-v5", MUJOCO),
    Healthy("halfcheetah_td3", "td3", "HalfCheetah-v5", MUJOCO),
    Healthy("halfcheetah_sac", "sac", "HalfCheetah-v5", MUJOCO),
    Healthy("loop_pendulum", "loop", "Pendulum-v1", LOOP),
    Healthy("loop_invertedpendulum", "loop", "InvertedPendulum-v5", LOOP),
)
