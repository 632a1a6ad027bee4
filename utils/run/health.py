"""The health rules of the TrainingMonitor as one list: `HealthRules`.

Each health rule (early stopping, bad returns, NaN/inf, explosions, memory, bounds) is
a module of utils/diagnosis/rules/health/ with its spec, its check and its words, and a
hook of its own. This list builds them in the order their findings are reported
(`health.CHECKS`); the loop adds `hooks` to its hook list. It also gives a
resumed run their checks of the restored state, and the env runners' watcher
(scripts/workers/worker_stats.py) the check of their pace (`check_pace`).
What happens to a finding (event line, console, pause) is the monitor's job. The
per-step checks are plain Python/NumPy on values the loop already has on the host, so
they cost a few microseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rltrain.utils.diagnosis.rules.health import CHECKS
from rltrain.utils.diagnosis.rules.health.non_finite import is_finite
from rltrain.utils.diagnosis.rules.spec import RuleContext, RuleHook

if TYPE_CHECKING:
    import torch

    from rltrain.utils.config.schema import TrainConfig
    from rltrain.utils.hooks.findings import Finding

__all__ = ["HealthRules", "is_finite"]


class HealthRules:
    """The health rules, each one a hook of the same shape (`hooks`: those not off, in
    the order their findings are reported), and their checks of a restored state."""

    def __init__(self, config: TrainConfig, obs_dim: int, device: torch.device) -> None:
        # The health rules do not look at the action space.
        context = RuleContext(config, obs_dim, action_dim=0, device=device)
        self.rules: list[RuleHook] = [cls(context) for cls in CHECKS]
        self.by_name: dict[str, Any] = {rule.spec.name: rule for rule in self.rules}
        self.hooks: list[RuleHook] = [rule for rule in self.rules if rule.rule.action != "off"]

    # ------------------------------------------- the restored state, on resume
    def check_transition(self, env_steps: int, obs: np.ndarray, action: np.ndarray,
                         reward: float) -> tuple[list[Finding], bool]:
        """(findings, whether every value is finite and may be stored)."""
        found = (self.by_name["non_finite"].check_transition(env_steps, obs, action, reward)
                 + self.by_name["state_bounds"].check(env_steps, obs))
        return found, is_finite(obs, action, reward)

    def check_update(self, env_steps: int, metrics: dict[str, float],
                     probe: bool = False) -> list[Finding]:
        """An update's (or, `probe`, the restored weights') loss, Q and gradients."""
        return [f for rule in self.rules if hasattr(rule, "check_update")
                for f in rule.check_update(env_steps, metrics, probe)]

    def check_parameters(self, env_steps: int, finite: bool) -> list[Finding]:
        return self.by_name["non_finite"].check_parameters(env_steps, finite)

    def check_episode(self, env_steps: int, episode_return: float) -> list[Finding]:
        return self.by_name["catastrophic_reward"].check(env_steps, episode_return)

    def check_patience(self, env_steps: int, evals_since_best: int) -> list[Finding]:
        return self.by_name["early_stopping"].check(env_steps, evals_since_best)

    def check_memory(self, env_steps: int) -> list[Finding]:
        return self.by_name["memory"].check(env_steps)

    def check_pace(self, env_steps: int, learner_waiting_percent: float,
                   runners_idle_percent: list[float]) -> list[Finding]:
        """A new reading of the env runners' and the learner's pace (num_workers)."""
        return self.by_name["worker_starvation"].check(env_steps, learner_waiting_percent,
                                                       runners_idle_percent)
