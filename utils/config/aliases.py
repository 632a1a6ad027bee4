"""What other RL tools call rltrain's config keys, for the unknown-key message.

A user coming from Stable-Baselines3 / RL Zoo, CleanRL or the reference TD3 code types
their names (`learning_rate`, `buffer_size`, `n_timesteps`); spelling similarity alone
would point `learning_rate` at `learning_starts`, which is a different thing entirely.
"""

from __future__ import annotations

from rltrain.agents.registry import ALGORITHMS

# other tool's top-level key -> rltrain's key(s) for the same setting; an algorithm's own
# options are added from its registry entry (`Algorithm.aliases`: SB3's `policy_delay`
# is td3.policy_delay and crossq.policy_delay)
ALIASES: dict[str, tuple[str, ...]] = {
    "learning_rate": ("actor_lr", "critic_lr"),  # SB3, CleanRL: one rate for both
    "lr": ("actor_lr", "critic_lr"),
    "buffer_size": ("replay_buffer_size",),  # SB3, CleanRL
    "n_timesteps": ("max_timesteps",),  # RL Zoo
    "total_timesteps": ("max_timesteps",),  # SB3 learn(), CleanRL
    "gradient_steps": ("utd_ratio",),  # SB3: updates per collection; here per env step
    "train_freq": ("utd_ratio",),
    "action_noise": ("exploration_noise", "noise_type"),  # SB3's NormalActionNoise / OU
    "expl_noise": ("exploration_noise",),  # sfujim/TD3
    "start_timesteps": ("learning_starts",),  # sfujim/TD3
    "net_arch": ("hidden_sizes",),  # SB3 policy_kwargs
    "policy_kwargs": ("hidden_sizes", "networks"),
    "max_grad_norm": ("grad_clip_norm",),
    "env": ("env_name",),
    "env_id": ("env_name",),  # CleanRL
    "n_envs": ("num_envs",),  # RL Zoo
}

# where the names alone would mislead
NOTES: dict[str, str] = {
    "train_freq": "rltrain updates after every env step, 'utd_ratio' times",
    "gradient_steps": "updates per env step",
    "action_noise": "the Gaussian std or OU sigma, and gaussian or ou",
}


def aliases() -> dict[str, tuple[str, ...]]:
    """Every other-tool name -> rltrain's key(s): `ALIASES` and the algorithms' options."""
    found = dict(ALIASES)
    for entry in ALGORITHMS.values():
        for alias, key in entry.aliases().items():
            found[alias] = (*found.get(alias, ()), key)
    return found


def alias_hint(key: str) -> str | None:
    """"; rltrain calls it 'a' and 'b'" for a known other-tool name, else None."""
    names = aliases().get(key)
    if names is None:
        return None
    quoted = [f"'{name}'" for name in names]
    joined = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    note = f" ({NOTES[key]})" if key in NOTES else ""
    return f"; rltrain calls it {joined}{note}"
