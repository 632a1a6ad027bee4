"""A fixed set of visited states on which the set-up rules read the policy's actions.

Every `STRIDE`-th observation of the run is copied until `SIZE` are kept or the states
are first read (numpy, no device work per env step); the policy's deterministic actions
on them, in units of each action dimension's half-range, say how much it changed and how
varied it is; `saturated` how many of them sit at a bound of the action range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rltrain.utils.config.fields import UNIT_INTERVAL
from rltrain.utils.diagnosis.rules.spec import Option

SIZE = 256
STRIDE = 7
AT_BOUND = 0.99  # of the half-range from the centre: an action at its bound
# The option of the rules that leave a policy saturated at its bounds unjudged: its actions
# do not move, and its actor's gradient is small, because its tanh is saturated; no
# learning rate mends that (Adam moves each weight by about its rate whatever the
# gradient), and what pushed it there (a rate, a reward or observation scale) is other
# rules' to name.
SATURATED = Option("saturated", 0.9, "share of the policy's actions at a bound of the "
                   "action range (within 1% of it) from which the rule does not judge the "
                   "actor: its tanh is saturated", UNIT_INTERVAL)


class ProbeStates:
    def __init__(self) -> None:
        self.states: list[np.ndarray] = []
        self.fixed = False  # from the first read on, the same states every time

    def offer(self, env_steps: int, obs: np.ndarray) -> None:
        if not self.fixed and len(self.states) < SIZE and env_steps % STRIDE == 0:
            self.states.append(np.array(obs, dtype=np.float32, copy=True))

    @property
    def ready(self) -> bool:
        return len(self.states) >= SIZE // 4

    def actions(self, view: Any) -> np.ndarray:
        """The policy's actions on the kept states, scaled to [-1, 1] per dimension."""
        self.fixed = True
        return half_ranges(view, np.asarray(view.act(np.stack(self.states)),
                                            dtype=np.float64))

    def spread(self, view: Any) -> float:
        """The mean over action dimensions of the actions' std across the kept states."""
        return float(self.actions(view).std(axis=0).mean())


def saturated(actions: np.ndarray) -> float:
    """The share of action components (in half-range units, as `ProbeStates.actions`)
    within 1% of the half-range of a bound: where the policy's tanh is saturated."""
    return float((np.abs(actions) >= AT_BOUND).mean()) if actions.size else 0.0


def saturated_share(view: Any, obs: Any) -> float:
    """`saturated` for the policy's deterministic actions on `obs` (an array or a
    tensor of observations), read with the networks as they are (eval mode outside
    updates)."""
    import torch  # here: the config's checks import the rules' specs, before torch

    states = torch.as_tensor(obs, dtype=torch.float32, device=view.device)
    with torch.no_grad():
        raw = view.actor(states).cpu().numpy()
    return saturated(half_ranges(view, raw))


def half_ranges(view: Any, raw: np.ndarray) -> np.ndarray:
    """Actions in the env's units as [-1, 1] per dimension (its half-range around its
    centre; a dimension without range stays in its units)."""
    low, high = np.asarray(view.action_low), np.asarray(view.action_high)
    half = np.where(high > low, (high - low) / 2, 1.0)
    return (raw - (high + low) / 2) / half
