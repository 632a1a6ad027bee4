"""A run's outcome (finished or paused, where, why), and what to change before resuming
a pause. How each outcome comes about is in scripts/training/trainer.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rltrain.utils.diagnosis.rules.registry import all_specs
from rltrain.utils.io.checkpoint import periodic_checkpoints
from rltrain.utils.run.folders import relative_to_cwd


@dataclass(frozen=True)
class RunOutcome:
    status: str  # "finished" or "paused"
    env_steps: int
    checkpoint: Path | None
    reason: str | None = None
    rule: str | None = None
    on_weights: bool = False  # the pause's rule judged the agent's weights


def resume_hint(outcome: RunOutcome) -> str | None:
    """What to change before resuming a pause, if the rule that paused can say."""
    if outcome.on_weights:
        return _weights_hint(outcome)
    spec = all_specs().get(outcome.rule or "")
    if spec is not None and spec.hint:
        return f"  the rule will fire again unless its cause changes: {spec.hint}"
    return None


def _weights_hint(outcome: RunOutcome) -> str:
    """A rule judged on the weights fires again on this checkpoint whatever --set changes,
    for its weights fail it. An update's loss and gradients judge the weights of the step
    before, so the newest weights known to pass are two steps back or more."""
    assert outcome.checkpoint is not None and outcome.rule is not None
    spec = all_specs().get(outcome.rule)
    change = spec.weight_hint if spec is not None and spec.weight_hint else "--set ..."
    earlier = [path for step, path in periodic_checkpoints(outcome.checkpoint.parent)
               if step <= outcome.env_steps - 2]
    instead = (f"resume an earlier checkpoint with a change, e.g. rltrain resume --checkpoint "
               f"{relative_to_cwd(earlier[-1])} {change}" if earlier else
               f"no kept checkpoint is older: train anew with a change, e.g. {change}")
    inputs = ("\n  if `rltrain diagnose` names reward_scale or observation_scale, the rewards "
              "or the observations are the cause: scale them in the env"
              if spec is not None and spec.input_scaled else "")
    return (f"  the weights in this checkpoint already fail the rule, so resuming it pauses "
            f"again whatever --set changes;\n  {instead};\n  or set each failing rule's "
            f"action to warn (--set monitor.{outcome.rule}.action=warn, ...) to let the run "
            f"try to recover{inputs}")
