"""Network capacity: networks too small for the value function or the policy."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

# Either the network's own widths or the shared ones count as the fix.
CRITIC_WIDTHS = "networks.critic.hidden_sizes|hidden_sizes"
ACTOR_WIDTHS = "networks.actor.hidden_sizes|hidden_sizes"

CASES = (
    Case("tiny_networks_pendulum_ddpg",
         "related: rll/rllab#13 (DDPG's {32, 32} networks only enough for "
         "cartpole); 'Deep Reinforcement Learning that Matters' (Henderson "
         "et al.: network size changes DDPG's results)", "capacity", "pendulum_ddpg",
         ("critic_fit", "actor_fit"), CRITIC_WIDTHS, "up", sets={"hidden_sizes": [4]}),
    Case("tiny_networks_lunarlander_td3",
         "related: rll/rllab#13 (small networks only enough for easy tasks);"
         " 'Deep Reinforcement Learning that Matters' (network size)",
         "capacity", "lunarlander_td3",
         ("critic_fit", "actor_fit"), CRITIC_WIDTHS, "up", sets={"hidden_sizes": [8, 8]}),
    Case("tiny_critic_hopper_sac",
         "related: 'Honey, I Shrunk The Actor' (Mysore et al.: the actor can"
         " shrink, the critic needs capacity); rll/rllab#13",
         "capacity", "hopper_sac", ("critic_fit",),
         CRITIC_WIDTHS, "up", sets={"networks": {"critic": {"hidden_sizes": [8]}}}),
    Case("tiny_actor_pendulum_sac",
         "related: 'Honey, I Shrunk The Actor' (Mysore et al.: how far the "
         "actor can shrink); rll/rllab#13", "capacity", "pendulum_sac", ("actor_fit",),
         ACTOR_WIDTHS, "up", sets={"networks": {"actor": {"hidden_sizes": [2]}}}),
    Case("tiny_networks_halfcheetah_sac",
         "related: rll/rllab#13 (small networks only enough for easy tasks);"
         " 'Deep Reinforcement Learning that Matters' (network size)",
         "capacity", "halfcheetah_sac",
         ("critic_fit", "actor_fit"), CRITIC_WIDTHS, "up", sets={"hidden_sizes": [8]}),
)
