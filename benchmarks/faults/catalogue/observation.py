"""Observations: their scale, what they leave out of the state, noise, lag, staleness."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

CASES = (
    Case("unnormalized_observations", "Unity-Technologies/ml-agents#481 (normalize the "
         "input space)", "observation", "pendulum_ddpg", ("observation_scale",),
         "normalize.observations", "set",
         env_fault={"fault": "observation_scale", "factor": 1000.0}),
    Case("observations_x1000_lunarlander_td3",
         "Unity-Technologies/ml-agents#5583 (observations ~1000x the others:"
         " learning stopped without normalisation); Unity-Technologies/ml-"
         "agents#1678", "observation", "lunarlander_td3",
         ("observation_scale",), "normalize.observations", "set",
         env_fault={"fault": "observation_scale", "factor": 1000.0}),
    Case("velocity_hidden_pendulum_td3",
         "'Memory-based Deep Reinforcement Learning for POMDPs' (Meng et "
         "al.: LSTM-TD3 on velocity-removed tasks); 'Partial Observability "
         "during DRL for Robot Control'", "observation", "pendulum_td3",
         ("partial_observability",), env_fault={"fault": "hidden_dimensions", "hidden": [2]}),
    Case("velocity_hidden_invertedpendulum_sac",
         "'Partial Observability during DRL for Robot Control' (arXiv "
         "2209.04999); 'Memory-based Deep Reinforcement Learning for POMDPs'", "observation",
         "invertedpendulum_sac", ("partial_observability",),
         env_fault={"fault": "hidden_dimensions", "hidden": [2, 3]}),
    Case("velocity_hidden_hopper_td3",
         "'Memory-based Deep Reinforcement Learning for POMDPs' (TD3 fails "
         "without the velocities); 'Partial Observability during DRL for "
         "Robot Control'", "observation", "hopper_td3",
         ("partial_observability",),
         env_fault={"fault": "hidden_dimensions", "hidden": [5, 6, 7, 8, 9, 10]}),
    Case("observation_delay_pendulum_ddpg",
         "'Revisiting State Augmentation methods for Reinforcement Learning "
         "with Stochastic Delays' (delays make RL fail to learn); related: "
         "Ericcsr/DiffSRL#2 (step() returned the previous observation)",
         "observation", "pendulum_ddpg",
         ("partial_observability",), env_fault={"fault": "observation_delay", "steps": 3}),
    Case("stale_observation_pendulum_sac",
         "silverlight6/TFTMuZeroAgent#46 (observations not updated after "
         "env.step()); kairproject/kair_algorithms_draft#52 (the observation"
         " does not change)", "observation", "pendulum_sac",
         ("frozen_observation",), env_fault={"fault": "stale_observation"}),
    Case("observation_noise_pendulum_td3",
         "'Memory-based Deep Reinforcement Learning for POMDPs' (noisy "
         "observations degrade TD3); 'Partial Observability during DRL for "
         "Robot Control'", "observation", "pendulum_td3",
         ("partial_observability",), env_fault={"fault": "observation_noise", "std": 1.0}),
)
