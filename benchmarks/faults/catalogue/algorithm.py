"""Algorithm-specific settings: TD3's delay and target smoothing, SAC's temperature and
target entropy."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

ENTROPY_RULES = ("entropy_temperature", "entropy_collapse")

CASES = (
    Case("sac_small_fixed_temperature_mountaincar", "rail-berkeley/softlearning#76 (SAC on "
         "MountainCar: the temperature and exploration); rail-berkeley/rlkit#97",
         "algorithm", "mountaincar_sac", ("entropy_collapse", "entropy_temperature",
                                          "no_learning"),
         "sac.ent_coef", "set", sets={"sac": {"ent_coef": 0.001}}, seeds=2),
    Case("policy_delay_huge_pendulum_td3",
         "related: dion-jy/gym-td3-keras#10 (with delayed updates the policy"
         " is slow to learn); 'Addressing Function Approximation Error in "
         "Actor-Critic Methods' (Fujimoto et al.: the delay d)", "algorithm", "pendulum_td3",
         ("actor_pace", "actor_stalled", "update_ratio"), "td3.policy_delay", "down",
         sets={"td3": {"policy_delay": 100}}),
    Case("policy_delay_huge_hopper_td3",
         "related: dion-jy/gym-td3-keras#10 (delayed policy updates made "
         "learning slow); 'Addressing Function Approximation Error in Actor-"
         "Critic Methods'", "algorithm", "hopper_td3",
         ("actor_pace", "actor_stalled", "update_ratio"), "td3.policy_delay", "down",
         sets={"td3": {"policy_delay": 50}}),
    Case("target_noise_huge_pendulum_td3",
         "sfujim/TD3#43 (target noise and clip wrong for another action "
         "range); vwxyzjn/cleanrl#279 (TD3's target noise not scaled to the "
         "action scale)", "algorithm", "pendulum_td3",
         ("target_smoothing",), "td3.target_policy_noise", "down",
         sets={"td3": {"target_policy_noise": 3.0, "target_noise_clip": 3.0}}),
    Case("sac_target_entropy_too_high_pendulum",
         "rail-berkeley/rlkit#75 (target entropy too high: alpha diverges "
         "into the hundreds); rail-berkeley/rlkit#50 (alpha 5.6e8, Q loss "
         "1e19)", "algorithm", "pendulum_sac",
         ENTROPY_RULES, "sac.target_entropy", "down", sets={"sac": {"target_entropy": 5.0}}),
    Case("sac_target_entropy_too_high_hopper",
         "rail-berkeley/rlkit#75 (an unreachable target entropy: alpha keeps"
         " rising); p-christ/Deep-Reinforcement-Learning-Algorithms-with-"
         "PyTorch#54", "algorithm", "hopper_sac",
         ENTROPY_RULES, "sac.target_entropy", "down", sets={"sac": {"target_entropy": 3.0}}),
    Case("sac_fixed_temperature_huge_lunarlander",
         "haarnoja/sac#12 (a fixed temperature of 1: returns swing wildly on"
         " LunarLanderContinuous; tune it)", "algorithm", "lunarlander_sac",
         ENTROPY_RULES, "sac.ent_coef", "down", sets={"sac": {"ent_coef": 10.0}}),
    Case("sac_fixed_temperature_huge_invertedpendulum",
         "haarnoja/sac#12 (temperature 1: unstable returns on "
         "InvertedPendulum); related: rail-berkeley/rlkit#75 (a large alpha:"
         " the policy attends only to entropy)", "algorithm",
         "invertedpendulum_sac", ENTROPY_RULES, "sac.ent_coef", "down",
         sets={"sac": {"ent_coef": 20.0}}),
)
