"""`state_bounds`: an observation outside the configured per-dimension bounds.

Off while neither bound is set. Checked on every observation the env returns, stored
or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.utils.config.fields import RuleAction, opt
from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec
from rltrain.utils.errors import ConfigError

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Step


@dataclass(frozen=True)
class StateBoundsConfig:
    """The `state_bounds` rule: per-dimension observation limits of a safe region."""

    low: tuple[float, ...] | None = opt(None, "lower bound per observation dimension (null: none)")
    high: tuple[float, ...] | None = opt(None, "upper bound per observation dimension (null: none)")
    action: RuleAction = opt("pause", "warn, pause or off")


SPECS = (RuleSpec(
    name='state_bounds',
    section='monitor',
    group='Health rules',
    fires_when='observation bounds',
    action='pause',
    config_class=StateBoundsConfig,
    hypothesis='if the agent leaves the safe region, then observations cross the configured '
               'bounds',
    check="check monitor.state_bounds and the env's safety constraints",
    hint='--set monitor.state_bounds.low=[...] / .high=[...] if such states are safe'),)


class StateBounds(RuleHook):
    spec = SPECS[0]

    def configured(self) -> tuple[Any, str]:
        self.low, self.high = _bounds(self.settings.low, self.settings.high,
                                      self.context.obs_dim)
        action = "off" if self.low is None and self.high is None else self.settings.action
        return [_plain(self.low), _plain(self.high)], action

    def on_step(self, step: Step) -> list[Finding]:
        return self.check(step.env_steps, step.next_obs)

    def check(self, env_steps: int, obs: np.ndarray) -> list[Finding]:
        if self.low is None and self.high is None:
            return []
        below = self.low is not None and bool((obs < self.low).any())
        above = self.high is not None and bool((obs > self.high).any())
        if not (below or above):
            return []
        dims = [int(i) for i in np.flatnonzero(
            (obs < self.low if self.low is not None else False)
            | (obs > self.high if self.high is not None else False))]
        return self.fire(env_steps, [float(obs[i]) for i in dims],
                         f"observation dimension(s) {dims} outside the configured bounds")


def _bounds(low: Any, high: Any, obs_dim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    arrays = []
    for name, value in (("low", low), ("high", high)):
        if value is not None and len(value) != obs_dim:
            raise ConfigError(f"config key 'monitor.state_bounds.{name}' has {len(value)} "
                              f"values but the observations have {obs_dim} dimensions")
        arrays.append(None if value is None else np.asarray(value, dtype=np.float64))
    return arrays[0], arrays[1]


def _plain(array: np.ndarray | None) -> list[float] | None:
    return None if array is None else array.tolist()
