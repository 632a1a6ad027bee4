"""TrainingMonitor: evaluates, checkpoints, records findings, and owns the one pause path.

Periodic evaluation with best-model saving, periodic checkpoints, and the findings of
the hooks (utils/hooks/hook.py: the health rules, the diagnostics), which may ask for a
pause. Every pause, whoever asks for it (a rule, Ctrl-C, SIGTERM, or `rltrain pause`
from another terminal), becomes one `request_pause` call; the loop finishes the
current env step, then writes `paused_at_step_<N>.pt` and stops. Warnings and pauses
go to `events.jsonl`, the console and TensorBoard; a rule that keeps warning is
repeated at most every `monitor.warn_every` env steps, with a count of what was held.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Evaluation, HookList
from rltrain.utils.io.checkpoint import prune_periodic, save_checkpoint

if TYPE_CHECKING:
    from rltrain.utils.config.schema import TrainConfig
    from rltrain.utils.hooks.eval_result import EvalResult
    from rltrain.utils.hooks.hook import RunSource
    from rltrain.utils.run.folders import RunPaths
    from rltrain.utils.run.logger import RunLogger


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
        # The bookkeeping before any write: a write that fails (a full disk) stops the run
        # with a checkpoint that holds this evaluation, its line kept by the logger.
        self.evaluations += 1
        self.latest_eval = result.mean
        improved = self.best_eval is None or result.mean > self.best_eval
        if improved:
            self.best_eval, self.best_eval_step, self.evals_since_best = (
                result.mean, env_steps, 0)
        else:
            self.evals_since_best += 1
        # SB3's EvalCallback names (eval/mean_reward is the mean return of the episodes)
        values = {"eval/mean_reward": result.mean, "eval/std_reward": result.std}
        if result.lengths:
            values["eval/mean_ep_length"] = sum(result.lengths) / len(result.lengths)
        self.logger.scalars(env_steps, values)
        self.logger.metric("eval", env_steps, evaluation=self.evaluations,
                           mean_return=result.mean, std_return=result.std,
                           returns=result.returns)
        if improved:
            self.checkpoint("best", env_steps)
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
