"""What a rule reports: a `Finding` (one rule firing at one env step), made by a `Rule`
(a name, a threshold and an action: warn, pause or off)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rule:
    name: str
    threshold: Any
    action: str  # "warn", "pause" or "off", after safe_mode is applied
    remedy: dict[str, Any] | None = None  # the suggested_set of a finding that gives none

    def fire(self, env_steps: int, value: Any, message: str, observation: bool = False,
             on_weights: bool = False,
             suggested_set: dict[str, Any] | None = None) -> list["Finding"]:
        """The finding of this rule (none when it is off); `observation`: info only;
        `on_weights`: judged on the agent's weights (see `Finding`); `suggested_set`: the
        config change proposed as the fix (see `Finding`; None: the rule's `remedy`)."""
        if self.action == "off":
            return []
        action = "info" if observation else self.action
        if suggested_set is None:
            suggested_set = self.remedy
        return [Finding(env_steps, self.name, value, self.threshold, action, message,
                        on_weights, dict(suggested_set or {}))]


@dataclass(frozen=True)
class Finding:
    """One rule firing at one env step."""

    env_steps: int
    rule: str
    value: Any
    threshold: Any
    action: str  # "info" (an observation), "warn" or "pause"
    message: str
    # Judged on the agent's weights (an update's loss, Q or gradients; the parameters):
    # then the weights saved at the step it fired at already fail it.
    on_weights: bool = False
    # The proposed fix as config keys and values that `rltrain resume --set` accepts
    # (dotted keys for nested sections); empty where no config change is the remedy.
    suggested_set: dict[str, Any] = field(default_factory=dict)

    def as_event(self) -> dict[str, Any]:
        event = {"rule": self.rule, "value": self.value, "threshold": self.threshold,
                 "action": self.action, "message": self.message}
        if self.suggested_set:
            event["suggested_set"] = dict(self.suggested_set)
        return event


def make_rule(name: str, threshold: Any, action: str, safe_mode: bool,
              remedy: dict[str, Any] | None = None) -> Rule:
    if action == "pause" and not safe_mode:
        action = "warn"
    return Rule(name, threshold, action, remedy)
