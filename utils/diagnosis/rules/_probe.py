"""A fixed set of visited states on which the set-up rules read the policy's actions.

Every `STRIDE`-th observation of the run is copied until `SIZE` are kept or the states
are first read (numpy, no device work per env step); the policy's deterministic actions
on them, in units of each action dimension's half-range, say how much it changed and how
varied it is; `pinned_share` says how many of them sit at a bound the critic pushes past.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rltrain.utils.config.fields import POSITIVE
from rltrain.utils.diagnosis.rules.spec import Option

SIZE = 256
STRIDE = 7
AT_BOUND = 0.99  # of the half-range from the centre: an action at its bound
# The option of the rules that leave a policy pinned at its bounds unjudged.
PINNED = Option("pinned", 0.9, "share of the actions at a bound the critic pushes past (a "
                "policy already where the critic sends it) from which the rule does not "
                "judge the actor", POSITIVE)


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
        raw = np.asarray(view.act(np.stack(self.states)), dtype=np.float64)
        low, high = view.action_low, view.action_high
        half = np.where(high > low, (high - low) / 2, 1.0)
        return (raw - (high + low) / 2) / half

    def spread(self, view: Any) -> float:
        """The mean over action dimensions of the actions' std across the kept states."""
        return float(self.actions(view).std(axis=0).mean())

    def pinned(self, view: Any) -> float:
        """`pinned_share` on the kept states (0 with none, or no agent to read)."""
        if view is None or not self.states:
            return 0.0
        return pinned_share(view, np.stack(self.states))


def pinned_share(view: Any, obs: Any) -> float:
    """The share of the policy's action components on `obs` that sit at a bound of the
    action range (within 1% of the half-range) while the critic's Q still rises past it
    (dQ/da points out of the range). Such an action is where the critic sends it, as far
    as the range goes: a bang-bang policy, healthy on many MuJoCo tasks. It does not
    move, and its tanh passes the actor little gradient, because there is nowhere
    further to go, not because the actor cannot follow the critic. The networks are read
    as they are (eval mode outside updates); only the actions get a gradient. `obs`: an
    array or a tensor of observations."""
    import torch  # here: the config's checks import the rules' specs, before torch

    low, high = np.asarray(view.action_low), np.asarray(view.action_high)
    half = np.where(high > low, (high - low) / 2, 1.0)
    states = torch.as_tensor(np.asarray(obs, dtype=np.float32) if isinstance(obs, np.ndarray)
                             else obs, dtype=torch.float32, device=view.device)
    with torch.no_grad():
        raw = view.actor(states)
    scaled = (raw.detach().cpu().numpy() - (high + low) / 2) / half
    at_bound = np.abs(scaled) >= AT_BOUND
    if not at_bound.any():
        return 0.0
    actions = raw.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (push,) = torch.autograd.grad(view.q_value(states, actions).sum(), actions)
    outward = np.sign(push.cpu().numpy()) == np.sign(scaled)
    return float((at_bound & outward).mean())
