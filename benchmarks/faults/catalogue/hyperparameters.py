"""Hyperparameter faults: learning rates, tau, the discount, exploration noise and
gradient clipping set far from what the task needs."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

# The rules that name a learning rate set too high: the rate itself, and the health
# rules whose pause hint and suggested_set lower it.
LR_RULES = ("learning_rate", "critic_loss_explosion", "q_explosion", "grad_explosion",
            "q_divergence")

CASES = (
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
         sets={"exploration_noise": 0.0}, seeds=2),
    Case("pendulum_noise_on_mountaincar", "DLR-RM/stable-baselines3#936 (MountainCar with "
         "DDPG and TD3 does not learn); openai/baselines#482 (ou 0.2 does not converge)",
         "hyperparameter", "mountaincar_td3", ("no_learning", "fixated_cluster"),
         "exploration_noise", "up", sets={"exploration_noise": 0.1, "noise_type": "gaussian"},
         seeds=2),
    Case("discount_too_close_to_one", "none found yet (RL Zoo's own MountainCar SAC entry "
         "uses gamma 0.9999)", "hyperparameter", "pendulum_ddpg",
         ("long_horizon",), "gamma", "down", sets={"gamma": 0.9999}),
    Case("lr_too_high_lunarlander_td3",
         "MorvanZhou/Reinforcement-learning-with-tensorflow#40 (DDPG never "
         "settles; the maintainer names a too-large learning rate)",
         "hyperparameter", "lunarlander_td3",
         LR_RULES, "critic_lr", "down", sets={"actor_lr": 0.02, "critic_lr": 0.02}),
    Case("lr_too_high_hopper_sac", "related: MorvanZhou/Reinforcement-learning-with-tensorflow#40 "
         "(returns keep swinging because the learning rate is too large; "
         "DDPG, not SAC)", "hyperparameter", "hopper_sac", LR_RULES,
         "critic_lr", "down", sets={"actor_lr": 0.03, "critic_lr": 0.03}),
    Case("critic_lr_too_low_lunarlander_sac",
         "'The Impact Of AC Learning Rate Setting on Training Effect in DPG "
         "Algorithm' (kezhi.tech blog: too small a critic lr converges "
         "slowly or not at all)", "hyperparameter", "lunarlander_sac",
         ("learning_rate", "critic_fit"), "critic_lr", "up", sets={"critic_lr": 1e-7}),
    Case("gamma_too_low_lunarlander_td3",
         "PaddlePaddle/PARL#957 (gamma 0.9: the car never reaches the top, "
         "0.99 works; DQN); awjuliani/DeepRL-Agents#22 (A3C with gamma 0.8 "
         "hardly converges)", "hyperparameter", "lunarlander_td3",
         ("short_horizon",), "gamma", "up", sets={"gamma": 0.5}),
    Case("gamma_too_low_hopper_sac", "PaddlePaddle/PARL#957 (gamma 0.9 too short-sighted; DQN); "
         "awjuliani/DeepRL-Agents#22 (gamma 0.8 hardly converges; A3C)",
         "hyperparameter", "hopper_sac",
         ("short_horizon",), "gamma", "up", sets={"gamma": 0.6}),
    Case("grad_clip_too_small_pendulum_td3",
         "related: Kaixhin/Rainbow#73 (gradient clipping removed for poor "
         "performance); the fault itself: none found yet", "hyperparameter", "pendulum_td3",
         ("learning_rate", "actor_stalled", "critic_fit"), "grad_clip_norm", "up",
         sets={"grad_clip_norm": 1e-4}),
    Case("exploration_noise_too_high_pendulum_ddpg",
         "MrSyee/pg-is-all-you-need#6 (DDPG: OU sigma large against [-1, 1] "
         "actions disturbs the agent; sigma 0.1 fixed it)", "hyperparameter",
         "pendulum_ddpg", ("excess_noise",), "exploration_noise", "down",
         sets={"exploration_noise": 3.0}),
    Case("exploration_noise_too_high_lunarlander_td3",
         "MrSyee/pg-is-all-you-need#6 (too much exploration noise against "
         "the action range stalls DDPG)", "hyperparameter",
         "lunarlander_td3", ("excess_noise",), "exploration_noise", "down",
         sets={"exploration_noise": 2.0, "noise_type": "gaussian"}),
)
