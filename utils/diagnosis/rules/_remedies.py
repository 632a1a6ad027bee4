"""What the older rules' remedies (`RuleSpec.remedy`, a finding's `suggested_set`) are
made of, and the list of the rules that have one.

Only keys that `rltrain resume --set` accepts (none of the keys fixed on resume:
env_name, seed, algo, network and buffer sizes). Rules whose cause lies in the env or
the reward (spikes, scale, a stale observation) propose none.
"""

from __future__ import annotations

from typing import Any

LR_FLOOR = 1e-5


def lower(value: float, factor: float) -> float:
    """A learning rate `factor` times `value`, not below LR_FLOOR, to 3 digits."""
    return float(f"{max(value * factor, LR_FLOOR):.3g}")


def clip_norm(config: Any) -> float:
    """A gradient clip norm: 1, or half of today's where that is already 1 or less."""
    clip = config.grad_clip_norm
    return 1.0 if clip is None or clip > 1.0 else float(f"{clip / 2:.3g}")
