"""Update maths for deterministic actor-critic agents (DDPG and TD3)."""
