"""TrainingMonitor: evaluates, checkpoints, records findings, and owns the one pause path.

Periodic evaluation with best-model saving, periodic checkpoints, and the findings of
the hooks (utils/hooks.py: the health rules, the diagnostics), which may ask for a
pause. Every pause, whoever asks for it (a rule, Ctrl-C, SIGTERM, or `rltrain pause`
from another terminal), becomes one `request_pause` call; the loop finishes the
current env step, then writes `paused_at_step_<N>.pt` and stops. Warnings and pauses
go to `events.jsonl`, the console and TensorBoard; a rule that keeps warning is
repeated at most every `monitor.warn_every` env steps, with a count of what was held.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rltrain.utils.checkpoint import prune_periodic, save_checkpoint
from rltrain.utils.hooks import Evaluation, Hook

if TYPE_CHECKING:
    from rltrain.utils.config import TrainConfig
    from rltrain.utils.evaluation import EvalResult
    from rltrain.utils.hooks import EpisodeEnd, RunSource, Step, Update
    from rltrain.utils.run_logger import RunLogger
    from rltrain.utils.runs import RunPaths


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


class HookList:
    """Calls every hook in turn and hands what they find to `report` (the monitor)."""

    def __init__(self, hooks: list[Hook], report: Callable[[list[Finding]], None]) -> None:
        self.hooks, self.report = hooks, report
        self._methods: dict[str, list[Callable[..., list[Finding]]]] = {}
        self._made_from: list[Hook] | None = None  # the list `_methods` was made from

    def _each(self, method: str, *args: Any) -> None:
        # Hooks that keep `Hook`'s no-op for a method are left out: this runs per env step.
        if self._made_from is not self.hooks:
            self._methods, self._made_from = {}, self.hooks
        if method not in self._methods:
            self._methods[method] = [getattr(h, method) for h in self.hooks
                                     if getattr(type(h), method) is not getattr(Hook, method)]
        for call in self._methods[method]:
            found = call(*args)
            if found:
                self.report(found)

    def on_step(self, step: Step) -> None:
        self._each("on_step", step)

    def on_update(self, update: Update) -> None:
        self._each("on_update", update)

    def on_step_end(self, env_steps: int) -> None:
        self._each("on_step_end", env_steps)

    def on_episode_end(self, episode: EpisodeEnd) -> None:
        self._each("on_episode_end", episode)

    def on_eval_start(self, env_steps: int) -> None:
        self._each("on_eval_start", env_steps)

    def on_eval(self, evaluation: Evaluation) -> None:
        self._each("on_eval", evaluation)

    def on_checkpoint(self, kind: str, path: Path, env_steps: int) -> None:
        self._each("on_checkpoint", kind, path, env_steps)

    def on_pause(self, env_steps: int) -> None:
        self._each("on_pause", env_steps)

    def close(self) -> None:
        for hook in self.hooks:
            hook.close()

    def state_dict(self) -> dict[str, Any]:
        return {hook.name: hook.state_dict() for hook in self.hooks}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for hook in self.hooks:
            if hook.name in state:
                hook.load_state_dict(state[hook.name])


class TrainingMonitor:
    """Decides what is due after each env step and records what the rules find."""

    def __init__(self, config: TrainConfig, paths: RunPaths, logger: RunLogger,
                 run: RunSource, say: Callable[[str], None]) -> None:
        self.config, self.paths, self.logger = config, paths, logger
        self.run, self._say = run, say
        # The hooks watching the run (the owner of the loop fills it): the monitor calls
        # them at each evaluation and checkpoint, and records what every one of them finds.
        self.hooks = HookList([], report=self.handle)
        self.evaluations = 0
        self.latest_eval: float | None = None
        self.best_eval: float | None = None
        self.best_eval_step: int | None = None
        self.evals_since_best = 0
        self.latest_checkpoint: str | None = None
        self.pause: Finding | None = None
        self._last_warned: dict[str, int] = {}
        self._held_back: dict[str, int] = {}
        self._request_file = str(paths.pause_request_file)  # os.path, not pathlib, per step

    # ------------------------------------------------------------ findings
    def handle(self, findings: list[Finding]) -> None:
        """Pause, warn (console too) or note (events.jsonl and TensorBoard only)."""
        for finding in findings:
            if finding.action == "pause":
                self.request_pause(finding)
            else:
                self._warn(finding)

    def request_pause(self, finding: Finding) -> None:
        """Ask the loop to pause after the current env step. The first request names the
        pause; every later one before it is recorded too, so that all the rules that fail
        are seen at once (not one per resume)."""
        if self.pause is None:
            self.pause = finding
        self._record(finding, "pause requested")

    def request_outside_pause(self, rule: str, message: str, env_steps: int) -> None:
        """A pause asked for from outside (Ctrl-C, SIGTERM, `rltrain pause`). On the last
        step the run finishes instead: paused at max_timesteps, it could not be resumed."""
        if env_steps >= self.config.max_timesteps:
            return
        self.request_pause(Finding(env_steps, rule, None, None, "pause", message))

    def _warn(self, finding: Finding) -> None:
        key = f"{finding.rule}:{finding.action}"  # a note never holds back a warning
        last = self._last_warned.get(key)
        if last is not None and finding.env_steps - last < self.config.monitor.warn_every:
            self._held_back[key] = self._held_back.get(key, 0) + 1
            return
        held = self._held_back.pop(key, 0)
        self._last_warned[key] = finding.env_steps
        self._record(finding, "warning" if finding.action == "warn" else "note", held)

    def _record(self, finding: Finding, label: str, held: int = 0) -> None:
        """One event line; `held`: how many of the same were held back since the last."""
        event = finding.as_event()
        if held:
            event["message"] += f" ({held} more since the last report)"
            event["held_back"] = held
        self.logger.event(finding.env_steps, **event)
        self.logger.text("events", f"{label}: [{finding.rule}] {event['message']}",
                         finding.env_steps)
        if finding.action != "info":
            self._say(f"{label} at step {finding.env_steps}: [{finding.rule}] "
                      f"{event['message']}")

    # -------------------------------------------------------------- per step
    def after_step(self, env_steps: int) -> None:
        """Evaluation, checkpoint and outside requests, when due."""
        config = self.config
        if env_steps % config.eval_freq == 0:
            self.evaluate(env_steps)
        if env_steps % config.checkpoint_freq == 0:
            self.checkpoint("periodic", env_steps)
        if os.path.exists(self._request_file):
            self._outside_request(env_steps)

    def _outside_request(self, env_steps: int) -> None:
        try:
            note = self.paths.pause_request_file.read_text().strip()
        except OSError:
            note = ""
        self.paths.pause_request_file.unlink(missing_ok=True)
        self.request_outside_pause("outside_request", note or "pause requested by "
                                   "`rltrain pause`", env_steps)

    # ------------------------------------------------- evaluation, checkpoints
    def evaluate(self, env_steps: int) -> EvalResult:
        self.hooks.on_eval_start(env_steps)
        result = self.run.evaluate()
        self.evaluations += 1
        self.latest_eval = result.mean
        # SB3's EvalCallback names (eval/mean_reward is the mean return of the episodes)
        values = {"eval/mean_reward": result.mean, "eval/std_reward": result.std}
        if result.lengths:
            values["eval/mean_ep_length"] = sum(result.lengths) / len(result.lengths)
        self.logger.scalars(env_steps, values)
        self.logger.metric("eval", env_steps, evaluation=self.evaluations,
                           mean_return=result.mean, std_return=result.std,
                           returns=result.returns)
        improved = self.best_eval is None or result.mean > self.best_eval
        if improved:
            self.best_eval, self.best_eval_step, self.evals_since_best = (
                result.mean, env_steps, 0)
            self.checkpoint("best", env_steps)
        else:
            self.evals_since_best += 1
        self._say(f"step {env_steps}: eval mean return {result.mean:.1f} +/- {result.std:.1f} "
                  f"(best {self.best_eval:.1f} at step {self.best_eval_step})")
        # After the line above, so that a pause (patience) follows the eval it is about.
        self.hooks.on_eval(Evaluation(env_steps, result, self.best_eval, self.evals_since_best))
        return result

    def take_pause(self, env_steps: int) -> tuple[Finding, Path]:
        """The run pauses after `env_steps`: the paused checkpoint, the hooks told, the
        event written. Returns the finding paused for and the checkpoint."""
        finding = self.pause
        assert finding is not None
        path = self.checkpoint("paused", env_steps)
        self.hooks.on_pause(env_steps)
        self.logger.event(env_steps, rule=finding.rule, value=finding.value,
                          threshold=finding.threshold, action="paused",
                          message=f"paused; checkpoint {path}")
        return finding, path

    def checkpoint(self, kind: str, env_steps: int) -> Path:
        """Write a `periodic`, `best`, `paused` checkpoint; prune old periodic ones."""
        path = {"periodic": self.paths.periodic_checkpoint(env_steps),
                "best": self.paths.best_model,
                "paused": self.paths.paused_checkpoint(env_steps)}[kind]
        save_checkpoint(path, self.run.state_dict(kind))
        if kind == "periodic":
            prune_periodic(self.paths.checkpoint_dir, self.config.keep_checkpoints)
        if kind != "best":
            self.latest_checkpoint = str(path)
        self.hooks.on_checkpoint(kind, path, env_steps)
        return path

    # ----------------------------------------------------------------- state
    def status(self) -> dict[str, Any]:
        """Evaluations and checkpoints, as status.json shows them."""
        return {"latest_eval": self.latest_eval, "best_eval": self.best_eval,
                "best_eval_step": self.best_eval_step, "evals_since_best": self.evals_since_best,
                "evaluations": self.evaluations, "latest_checkpoint": self.latest_checkpoint}

    def state_dict(self) -> dict[str, Any]:
        return {"evaluations": self.evaluations, "latest_eval": self.latest_eval,
                "best_eval": self.best_eval, "best_eval_step": self.best_eval_step,
                "evals_since_best": self.evals_since_best,
                "last_warned": dict(self._last_warned), "held_back": dict(self._held_back)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.evaluations = int(state["evaluations"])
        self.latest_eval, self.best_eval = state["latest_eval"], state["best_eval"]
        self.best_eval_step = state["best_eval_step"]
        self.evals_since_best = int(state["evals_since_best"])
        self._last_warned = dict(state["last_warned"])
        self._held_back = dict(state["held_back"])
