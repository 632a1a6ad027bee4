"""Code faults in a plain PyTorch loop (benchmarks/faults/loop.py) watched by the
`Watcher`: what users' own DDPG loops get wrong."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

CASES = (
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
    Case("next_obs_is_obs", "related: hill-a/stable-baselines#769 (DDPG/TD3's buffer stored the"
         " wrong next state at an episode's end); "
         "tensorforce/tensorforce#142 (replay returned wrong next_states)",
         "code", "loop_pendulum", ("transition_integrity",),
         loop="next_obs_is_obs"),
    Case("previous_reward_stored",
         "openai/spinningup#50 (each buffer slot stored the previous step's "
         "reward); openai/spinningup#67 (a one-step reward delay confirmed)",
         "code", "loop_pendulum",
         ("transition_integrity",), loop="previous_reward"),
    Case("samples_recent_only", "related: Unity-Technologies/ml-agents#4132 (too small a replay "
         "window: forgetting); 'Revisiting Fundamentals of Experience "
         "Replay' (Fedus et al.)", "code", "loop_pendulum", ("sample_recency",),
         loop="samples_recent_only"),
    Case("samples_unfilled_rows",
         "assume-framework/assume#855 (buffer flagged full too early: empty "
         "rows sampled); tensorpack/tensorpack#269 (sampling reached "
         "uninitialised rows)", "code", "loop_pendulum",
         ("transition_integrity",), loop="samples_unfilled_rows"),
    Case("actor_updates_per_critic",
         "instadeepai/Mava#1208 (the actor got policy_update_delay times "
         "more updates than the critic); 'Addressing Function Approximation "
         "Error in Actor-Critic Methods'", "code", "loop_pendulum",
         ("actor_pace", "update_ratio"), loop="actor_updates_per_critic"),
    Case("no_reset_at_truncation", "higgsfield-ai/higgsfield#12 (DDPG/TD3 loops that never call "
         "env.reset() when done); exalearn/EXARL#4 (step() called after "
         "done=True)", "code", "loop_pendulum",
         ("short_episodes", "transition_integrity"), loop="no_reset_at_truncation"),
    Case("actor_minimises_q", "KanishJebaMathewM/Truxify#11885 (a missing minus sign in the "
         "actor's loss: the policy minimises Q); related: ray-"
         "project/ray#26653 ('learning to lose', a suspected actor-loss "
         "sign)", "code", "loop_pendulum", ("actor_direction",),
         loop="actor_minimises_q"),
    Case("next_obs_is_obs_invertedpendulum",
         "related: hill-a/stable-baselines#769 (the wrong next observation "
         "stored in the replay buffer)", "code", "loop_invertedpendulum",
         ("transition_integrity",), loop="next_obs_is_obs"),
    Case("samples_recent_only_invertedpendulum",
         "related: Unity-Technologies/ml-agents#4132 (too small a replay "
         "window: forgetting); 'A Deeper Look at Experience Replay' (Zhang "
         "and Sutton)", "code", "loop_invertedpendulum",
         ("sample_recency",), loop="samples_recent_only"),
    Case("actor_minimises_q_invertedpendulum",
         "KanishJebaMathewM/Truxify#11885 (the actor's loss without its "
         "minus sign minimises Q); related: ray-project/ray#26653", "code", "loop_invertedpendulum",
         ("actor_direction",), loop="actor_minimises_q"),
    Case("no_zero_grad_invertedpendulum", "pytorch/pytorch#47175 (forgetting zero_grad); meta-"
         "pytorch/torchforge#71 (grads not zeroed each step)", "code", "loop_invertedpendulum",
         ("gradients_not_zeroed", "grad_explosion", "critic_loss_explosion",
          "learning_rate", "q_divergence"), loop="no_zero_grad"),
)
