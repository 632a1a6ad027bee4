"""A fixed set of visited states on which the set-up rules read the policy's actions.

Every `STRIDE`-th observation of the run is copied until `SIZE` are kept or the states
are first read (numpy, no device work per env step); the policy's deterministic actions
on them, in units of each action dimension's half-range, say how much it changed and how
varied it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SIZE = 256
STRIDE = 7


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
