"""A finding's `suggested_set` in RLlib's settings (AlgorithmConfig's names), for SAC,
PPO and DQN: the other direction of integrations/rllib_settings.py.

A rule proposes rltrain's keys (`critic_lr`, `batch_size`, `utd_ratio`, ...) or, for
PPO's and DQN's families, the settings it reads under SB3's names (`ent_coef`,
`n_epochs`, `exploration_fraction`, ...); `RLlibKeys` restates each as the RLlib setting
that makes the change, and the message says which have none. This module imports
nothing of Ray.
"""

from __future__ import annotations

from typing import Any, Mapping

from rltrain.integrations.library_keys import translated
from rltrain.integrations.rllib_settings import RULE_NAMES
from rltrain.utils.hooks.findings import Finding

# rltrain's key -> RLlib's setting, where the value carries over as it is
SAME_VALUE = {
    "SAC": {"gamma": "gamma", "tau": "tau", "actor_lr": "actor_lr", "critic_lr": "critic_lr",
            "batch_size": "train_batch_size_per_learner",
            "learning_starts": "num_steps_sampled_before_learning_starts",
            "sac.target_entropy": "target_entropy"},
    "PPO": {"gamma": "gamma", "batch_size": "minibatch_size"},
    "DQN": {"gamma": "gamma", "tau": "tau", "batch_size": "train_batch_size_per_learner",
            "learning_starts": "num_steps_sampled_before_learning_starts"},
}
# PPO and DQN step one optimiser (`lr`) for the policy and its value, or the Q network
LEARNING_RATES = ("actor_lr", "critic_lr", "learning_rate")
EXPLORATION = ("exploration_fraction", "exploration_final_eps")  # DQN's `epsilon`
REPLAYED = ("SAC", "DQN")


class RLlibKeys:
    """A finding's `suggested_set` in RLlib's settings for one algorithm. `library`: the
    run's config.yaml `library` (the epsilon schedule a fix changes part of), over a run
    of `total_timesteps` env steps."""

    def __init__(self, algorithm: str, batch_size: int, total_timesteps: int = 0,
                 library: Mapping[str, Any] | None = None) -> None:
        self.algorithm, self.batch_size = algorithm, batch_size
        self.total, self.library = total_timesteps, dict(library or {})
        self.names = {**SAME_VALUE[algorithm], **RULE_NAMES[algorithm]}
        self.one_rate = algorithm != "SAC"

    def translate(self, suggested: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The RLlib settings for `suggested`, and the rltrain keys RLlib has none for."""
        rllib: dict[str, Any] = {}
        missing: list[str] = []
        rates = [v for k, v in suggested.items() if k in LEARNING_RATES]
        if self.one_rate and rates:
            rllib["lr"] = min(rates)  # the careful one, for both
        for key, value in suggested.items():
            if self.one_rate and key in LEARNING_RATES or key in EXPLORATION:
                continue
            special = self._special(key, value)
            if key in self.names:
                rllib[self.names[key]] = value
            elif special is not None:
                rllib.update(special)
            else:
                missing.append(key)
        if any(key in suggested for key in EXPLORATION):
            self._epsilon(suggested, rllib, missing)
        return rllib, missing

    def _special(self, key: str, value: Any) -> dict[str, Any] | None:
        """`key`'s RLlib settings where its value changes form; None: RLlib has none."""
        replayed = self.algorithm in REPLAYED
        if key == "hidden_sizes":
            return {"model_config": {"fcnet_hiddens": list(value)}}
        if key == "grad_clip_norm":
            return {"grad_clip": value, "grad_clip_by": "global_norm"}
        if replayed and key == "replay_buffer_size":
            return {"replay_buffer_config": {"capacity": value}}
        if replayed and key == "utd_ratio":  # env steps trained on per env step sampled
            return {"training_intensity": float(value) * self.batch_size}
        if self.algorithm == "SAC" and key == "sac.ent_coef" and str(value).startswith("auto_"):
            return {"initial_alpha": float(str(value).removeprefix("auto_"))}
        return None

    def _epsilon(self, suggested: dict[str, Any], rllib: dict[str, Any],
                 missing: list[str]) -> None:
        """SB3's exploration_fraction and exploration_final_eps as DQN's epsilon schedule,
        from its first value to the last over that share of the run's env steps."""
        library = self.library
        known = all(key in library for key in ("exploration_initial_eps", *EXPLORATION))
        if self.algorithm != "DQN" or not known or self.total <= 0:
            missing.extend(key for key in EXPLORATION if key in suggested)
            return
        fraction = float(suggested.get("exploration_fraction",
                                       library["exploration_fraction"]))
        final = suggested.get("exploration_final_eps", library["exploration_final_eps"])
        end = max(round(fraction * self.total), 1)
        rllib["epsilon"] = [[0, library["exploration_initial_eps"]], [end, final]]

    def finding(self, finding: Finding) -> Finding:
        """`finding` with its fix in RLlib's settings (its message says what has none)."""
        if not finding.suggested_set:
            return finding
        rllib, missing = self.translate(finding.suggested_set)
        named = [key for key in ("actor_lr", "critic_lr") if key in finding.suggested_set]
        both = "; RLlib's one lr is both networks'" if self.one_rate and len(named) == 1 else ""
        return translated(finding, "RLlib", rllib, missing, both)
