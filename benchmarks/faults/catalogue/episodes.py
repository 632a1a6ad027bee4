"""Episode structure: how episodes end (termination, truncation) and restart."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

CASES = (
    Case("time_limit_as_terminal", "openai/gym#3102 (TimeLimit's truncation); "
         "DLR-RM/stable-baselines3#1864; Toni-SM/skrl#363", "episode", "pendulum_ddpg",
         ("time_limit_terminal",), env_fault={"fault": "time_limit_terminal"}),
    Case("episode_cut_short_pendulum_ddpg",
         "Farama-Foundation/Minigrid#193 (max_steps too small: the agent "
         "never reaches the goal); PathmindAI/nativerl#218 (episodes cut "
         "short: it never learns)", "episode", "pendulum_ddpg",
         ("short_episodes",), "env_kwargs.max_episode_steps", "up",
         sets={"env_kwargs": {"max_episode_steps": 5}}),
    Case("episode_cut_short_lunarlander_td3",
         "Farama-Foundation/Minigrid#193 (a step limit too small to reach "
         "the goal); PathmindAI/nativerl#218 (episodes cut short)", "episode", "lunarlander_td3",
         ("short_episodes",), "env_kwargs.max_episode_steps", "up",
         sets={"env_kwargs": {"max_episode_steps": 20}}),
    Case("terminates_at_once_hopper_td3",
         "related: openai/roboschool#152 (Hopper's health condition too "
         "strict: episodes end early)", "episode", "hopper_td3",
         ("short_episodes",), "env_kwargs.healthy_z_range", "set",
         sets={"env_kwargs": {"healthy_z_range": [1.5, 2.0]}}),
    Case("terminates_after_ten_invertedpendulum_sac",
         "openai/gym#1230 (TimeLimit's done conflated with the task's end); "
         "'Time Limits in Reinforcement Learning' (Pardo et al.)", "episode",
         "invertedpendulum_sac", ("short_episodes",),
         env_fault={"fault": "terminate_after", "steps": 10}),
)
