"""The config change proposed by the older rules (health rules, flow-1 diagnostics)
whose remedy is a config change: rule name -> `suggested_set` for a config.

Only keys that `rltrain resume --set` accepts (none of the keys fixed on resume:
env_name, seed, algo, network and buffer sizes). Rules whose cause lies in the env or
the reward (spikes, scale, a stale observation) propose none.
"""

from __future__ import annotations

from typing import Any, Callable

LR_FLOOR = 1e-5


def _lower(value: float, factor: float) -> float:
    return float(f"{max(value * factor, LR_FLOOR):.3g}")


def _clip(config: Any) -> float:
    clip = config.grad_clip_norm
    return 1.0 if clip is None or clip > 1.0 else float(f"{clip / 2:.3g}")


REMEDIES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "critic_loss_explosion": lambda c: {"critic_lr": _lower(c.critic_lr, 0.1),
                                        "grad_clip_norm": _clip(c)},
    "q_explosion": lambda c: {"critic_lr": _lower(c.critic_lr, 0.1)},
    "grad_explosion": lambda c: {"grad_clip_norm": _clip(c)},
    "exploding_gradient": lambda c: {"grad_clip_norm": _clip(c)},
    "q_overestimation": lambda c: {"critic_lr": _lower(c.critic_lr, 0.3)},
    "dead_relu": lambda c: {"actor_lr": _lower(c.actor_lr, 0.3),
                            "critic_lr": _lower(c.critic_lr, 0.3)},
    "short_horizon": lambda c: {"gamma": 0.99},
}


def remedy(rule: str, config: Any) -> dict[str, Any]:
    """The proposed change for `rule` under `config` ({} where none is)."""
    make = REMEDIES.get(rule)
    return {} if make is None else make(config)
