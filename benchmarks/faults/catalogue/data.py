"""The data pipeline: the replay buffer's size, the batch size, and how often the actor
moves against the critic."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

CASES = (
    Case("replay_buffer_too_small", "Unity-Technologies/ml-agents#4132 (SAC buffers too "
         "small: catastrophic forgetting); DLR-RM/stable-baselines3#1885 (the buffer's size "
         "per env)", "data", "pendulum_ddpg", ("small_replay",),
         "replay_buffer_size", "up", sets={"replay_buffer_size": 1000}),
    Case("replay_buffer_too_small_lunarlander_sac",
         "Unity-Technologies/ml-agents#4132 (SAC buffers too small: "
         "catastrophic forgetting); 'Revisiting Fundamentals of Experience "
         "Replay' (Fedus et al.)", "data", "lunarlander_sac",
         ("small_replay",), "replay_buffer_size", "up", sets={"replay_buffer_size": 500}),
    Case("batch_size_tiny_pendulum_ddpg",
         "akolishchak/doom-net-pytorch#7 (batch_size 1 learns nothing: high "
         "variance); ikostrikov/pytorch-a2c-ppo-acktr-gail#176 (a size-1 "
         "minibatch's noisy gradient destroys progress)", "data", "pendulum_ddpg",
         ("gradient_noise",), "batch_size", "up", sets={"batch_size": 2}),
    Case("batch_size_tiny_lunarlander_sac",
         "akolishchak/doom-net-pytorch#7 (batch_size 1 learns nothing: high "
         "variance); ikostrikov/pytorch-a2c-ppo-acktr-gail#176", "data", "lunarlander_sac",
         ("gradient_noise",), "batch_size", "up", sets={"batch_size": 4}),
    Case("batch_size_tiny_hopper_td3",
         "akolishchak/doom-net-pytorch#7 (batch_size 1 learns nothing: high "
         "variance); ikostrikov/pytorch-a2c-ppo-acktr-gail#176", "data", "hopper_td3",
         ("gradient_noise",), "batch_size", "up", sets={"batch_size": 2}),
    Case("actor_outpaces_critic_pendulum_ddpg",
         "'The Impact Of AC Learning Rate Setting on Training Effect in DPG "
         "Algorithm' (kezhi.tech blog: DDPG needs critic lr above actor lr);"
         " related: yanpanlau/DDPG-Keras-Torcs#34", "data", "pendulum_ddpg",
         ("actor_pace", "learning_rate"), "actor_lr", "down",
         sets={"actor_lr": 1e-2, "critic_lr": 1e-5}),
)
