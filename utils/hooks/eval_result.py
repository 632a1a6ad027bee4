"""The result of an evaluation: what the monitor records and the hooks are told of."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EvalResult:
    returns: list[float]
    lengths: list[int]
    discounted_returns: list[float]
    start_obs: np.ndarray  # [n_episodes, obs_dim]
    final_obs: np.ndarray  # [n_episodes, obs_dim]
    truncated: list[bool]  # ended by a time limit (the value of final_obs still counts)

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        with np.errstate(invalid="ignore"):  # inf returns: nan, said by the non_finite rule
            return float(np.std(self.returns))
