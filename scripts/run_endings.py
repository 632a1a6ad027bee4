"""How a run ends: finished, paused, or stopped by something outside the training; and
what to change before resuming a pause.

Finished and paused runs are the loop's own endings (max_timesteps reached; a pause asked
for by a rule, a signal or `rltrain pause`). The others come as exceptions out of the
loop: a file that cannot be written (a full disk), an exception raised by the env's own
code, the device out of memory. Each one still leaves a paused checkpoint where one can be
written (not halfway through an env step's bookkeeping), and its reason in events.jsonl
and status.json, so that `rltrain status` and `rltrain diagnose` can say what happened.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from rltrain.utils.checkpoint import periodic_checkpoints
from rltrain.utils.errors import EnvFailure, OutputError, describe_write_failure, first_line
from rltrain.utils.rules import all_specs
from rltrain.utils.runs import relative_to_cwd

if TYPE_CHECKING:
    from rltrain.scripts.trainer import Trainer


@dataclass(frozen=True)
class RunOutcome:
    status: str  # "finished" or "paused"
    env_steps: int
    checkpoint: Path | None
    reason: str | None = None
    rule: str | None = None
    on_weights: bool = False  # the pause's rule judged the agent's weights


RULE_HINTS = {
    "early_stopping": "--set patience=N (N larger than now) to keep training",
    "catastrophic_reward": "--set min_reward_threshold=X (lower) if such returns are expected",
    "memory": "a smaller replay_buffer_size or batch_size, fewer runs on the machine (or "
              "GPU), or --set monitor.memory.threshold=MiB (higher)",
    "state_bounds": "--set monitor.state_bounds.low=[...] / .high=[...] if such states are safe",
    "non_finite": "fix the env (its NaN/inf transitions are not stored), or --set "
                  "monitor.non_finite.action=warn to train on without them",
    # What the env and config give the agent (utils/diagnostics/inputs.py): the replay
    # buffer already holds what the env gave, so a fixed env needs a new run.
    "observation_scale": "scale that dimension in the env and train a new run (the replay "
                         "buffer holds the old scale), or --set "
                         "diagnostics.observation_scale.action=warn",
    "frozen_observation": "fix the env's step() and train a new run, or --set "
                          "diagnostics.frozen_observation.action=warn",
    "time_limit_terminal": "report the time limit as truncated and train a new run (the "
                           "stored transitions say terminated), or --set "
                           "diagnostics.time_limit_terminal.action=warn",
    "short_horizon": "--set gamma=0.99 (or what the task needs)",
    "small_replay": "replay_buffer_size cannot change on resume: train a new run with a "
                    "larger one, or --set diagnostics.small_replay.action=warn",
    "ignored_action": "make the env apply the action and train a new run (the replay "
                      "buffer holds what the broken env gave), or --set "
                      "diagnostics.ignored_action.action=warn",
}
# Rules that rewards or observations far from unit scale also set off (targets, losses and
# gradients scale with them).
INPUT_SCALED = {"critic_loss_explosion", "q_explosion", "grad_explosion"}
# For rules judged on the agent's weights: a change that keeps them from diverging.
WEIGHT_HINTS = {
    "critic_loss_explosion": "--set critic_lr=1e-4 --set grad_clip_norm=10",
    "q_explosion": "--set critic_lr=1e-4 --set gamma=0.98",
    "grad_explosion": "--set grad_clip_norm=10 --set critic_lr=1e-4",
    "non_finite": "--set critic_lr=1e-4 --set actor_lr=1e-4 --set grad_clip_norm=10",
}


def resume_hint(outcome: RunOutcome) -> str | None:
    """What to change before resuming a pause, if the rule that paused can say."""
    if outcome.on_weights:
        return _weights_hint(outcome)
    declared = all_specs().get(outcome.rule or "")
    hint = RULE_HINTS.get(outcome.rule or "") or (declared.hint if declared else None)
    if hint:
        return f"  the rule will fire again unless its cause changes: {hint}"
    return None


def _weights_hint(outcome: RunOutcome) -> str:
    """A rule judged on the weights fires again on this checkpoint whatever --set changes,
    for its weights fail it. An update's loss and gradients judge the weights of the step
    before, so the newest weights known to pass are two steps back or more."""
    assert outcome.checkpoint is not None and outcome.rule is not None
    change = WEIGHT_HINTS.get(outcome.rule, "--set ...")
    earlier = [path for step, path in periodic_checkpoints(outcome.checkpoint.parent)
               if step <= outcome.env_steps - 2]
    instead = (f"resume an earlier checkpoint with a change, e.g. rltrain resume --checkpoint "
               f"{relative_to_cwd(earlier[-1])} {change}" if earlier else
               f"no kept checkpoint is older: train anew with a change, e.g. {change}")
    inputs = ("\n  if `rltrain diagnose` names reward_scale or observation_scale, the rewards "
              "or the observations are the cause: scale them in the env"
              if outcome.rule in INPUT_SCALED else "")
    return (f"  the weights in this checkpoint already fail the rule, so resuming it pauses "
            f"again whatever --set changes;\n  {instead};\n  or set each failing rule's "
            f"action to warn (--set monitor.{outcome.rule}.action=warn, ...) to let the run "
            f"try to recover{inputs}")


def finish(trainer: Trainer) -> RunOutcome:
    steps = trainer.counters.env_steps
    path = trainer.paths.periodic_checkpoint(steps)
    if trainer.monitor.latest_checkpoint != str(path):  # not written at this step already
        path = trainer.monitor.checkpoint("periodic", steps)
    trainer.write_status("finished")
    return RunOutcome("finished", steps, path)


def pause(trainer: Trainer) -> RunOutcome:
    finding, steps = trainer.monitor.pause, trainer.counters.env_steps
    assert finding is not None
    path = trainer.monitor.checkpoint("paused", steps)
    trainer.hooks.on_pause(steps)
    trainer.logger.event(steps, rule=finding.rule, value=finding.value,
                         threshold=finding.threshold, action="paused",
                         message=f"paused; checkpoint {path}")
    trainer.write_status("paused", pause_reason=f"[{finding.rule}] {finding.message}")
    return RunOutcome("paused", steps, path, finding.message, finding.rule, finding.on_weights)


def output_failed(trainer: Trainer, exc: BaseException) -> OutputError:
    """A log or checkpoint could not be written (disk full, permissions)."""
    problem = describe_write_failure(exc)
    _, then = _stop(trainer, "write_failure", problem, "that is fixed")
    return OutputError(f"stopped at step {trainer.counters.env_steps}: {problem}; {then}")


def env_failed(trainer: Trainer, exc: EnvFailure) -> EnvFailure:
    """The env raised an exception; its traceback goes to the log folder. A failed vector
    step leaves the run as it was before it, with the step's actions kept, so the resumed
    run takes that step again with the same actions."""
    problem = str(exc)
    # In an evaluation: nothing of it was recorded yet, so the resumed run does it again,
    # and the checkpoint and diagnostics due after it, before its next step.
    trainer.redo_due = trainer.in_due
    with contextlib.suppress(OSError):
        trace = trainer.paths.env_error_file(trainer.counters.env_steps)
        trace.write_text(exc.details)
        problem += f" (traceback: {trace})"
    _, then = _stop(trainer, "env_error", problem, "the env is fixed")
    return EnvFailure(f"stopped at step {trainer.counters.env_steps}: {problem}; {then}",
                      exc.details)


def out_of_memory(trainer: Trainer, exc: torch.OutOfMemoryError) -> RunOutcome:
    """The device ran out of memory (on CUDA, other processes count too): a pause by the
    memory rule, with a checkpoint if one can still be written (it is saved from host
    memory). An update under way when it happened is lost, or half in the checkpoint."""
    if trainer.device.type == "cuda":
        torch.cuda.empty_cache()
    problem = f"out of {trainer.device.type} memory: {first_line(exc)}"
    saved, _ = _stop(trainer, "memory", problem, "memory is free")
    if saved is None:
        raise exc
    return RunOutcome("paused", trainer.counters.env_steps, saved, problem, "memory")


def _stop(trainer: Trainer, rule: str, problem: str, fixed: str) -> tuple[Path | None, str]:
    """Write a paused checkpoint if one can be, and the reason where status reads it.
    Returns the checkpoint, and which checkpoint to resume once `fixed`."""
    steps, monitor = trainer.counters.env_steps, trainer.monitor
    saved: Path | None = None
    with contextlib.suppress(OSError, OutputError):
        if not trainer.in_env_step:
            saved = monitor.checkpoint("paused", steps)
    with contextlib.suppress(OSError, OutputError):
        trainer.logger.event(steps, rule=rule, value=None, threshold=None,
                             action="pause" if saved else "stop", message=problem)
    with contextlib.suppress(OSError, OutputError):
        trainer.write_status("paused" if saved else "crashed", pause_reason=problem)
    if saved is not None:
        return saved, (f"a checkpoint was still written; once {fixed}: rltrain resume "
                       f"--checkpoint {saved}")
    none = ("no checkpoint was written halfway through an env step" if trainer.in_env_step
            else "no checkpoint could be written")
    newest = monitor.latest_checkpoint
    return None, f"{none}; the newest is {newest}" if newest else none
