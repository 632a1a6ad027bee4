"""The Python API: `train`, `resume`, `load_policy` and `diagnose`, as `rltrain train`,
`rltrain resume`, `rltrain eval` and `rltrain diagnose --json` do them.

Each function goes the CLI command's own way (the same config validation, the same
`prepare_train` / `prepare_resume`, the same run folders and files); where the CLI would
print a one-line error and exit with code 2, 4 or 5, these raise the exception behind it
(`UserError` and its kinds, `OutputError`, `EnvFailure`). Importing this module loads
neither torch nor Gymnasium: they are imported when a function is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltrain.utils.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from rltrain.networks.actor import Actor
    from rltrain.scripts.training.outcome import RunOutcome
    from rltrain.utils.config.schema import TrainConfig
    from rltrain.utils.run.folders import RunPaths
    from rltrain.utils.training.normalize import Normalizer


@dataclass(frozen=True)
class Run:
    """How a run ended. `status` is "finished" (max_timesteps reached) or "paused" (a
    resumable checkpoint was written; `reason` says why). `checkpoint`: the final or
    paused checkpoint (None if none could be written). `best_eval`: the best evaluation
    return so far (None before the first evaluation)."""

    name: str
    status: str
    env_steps: int
    checkpoint: Path | None
    log_dir: Path
    checkpoint_dir: Path
    reason: str | None = None
    best_eval: float | None = None


def train(config: str | Path | Mapping[str, Any] | TrainConfig | None = None,
          **overrides: Any) -> Run:
    """Train a new agent, as `rltrain train --config CONFIG --set KEY=VALUE ...` does.

    `config`: a YAML file's path (flat, or keyed by env id as RL Zoo's files are), the
    name of a shipped config ("pendulum_ddpg.yaml"), a mapping of config keys, or a
    `TrainConfig`; None: the shipped tuned entry for `algo` and `env_name`, as
    `rltrain train --algo A --env ID` takes it (utils/config/resolve.py). `overrides`:
    config keys and their values, dotted keys for nested sections
    (`**{"monitor.q_explosion.action": "warn"}`) or nested dicts
    (`monitor={"q_explosion": {"action": "warn"}}`), validated as `--set` is.
    Raises `EnvError` for an unknown env, `ConfigError` for a bad config (naming every
    problem, one a line: an unknown env's first when there are others), `OutputError`
    when a file cannot be written, `EnvFailure` when the env's own code raises.
    """
    from rltrain.utils.config.resolve import ConfigRequest, resolve_config
    from rltrain.utils.run.progress import say
    from rltrain.utils.training.envs import check_env_id

    # The config is checked before torch is imported: a refused one costs no torch start-up.
    validated = resolve_config(ConfigRequest(config, keywords=overrides), say,
                               check_env=check_env_id)
    from rltrain.scripts.training.resume import prepare_train

    trainer, paths = prepare_train(validated)
    say(f"run {paths.name}: {validated.algo} on {validated.env_name}, "
        f"{validated.max_timesteps} steps, device {trainer.device}")
    return _supervised(trainer, paths, None)


def resume(checkpoint: str | Path, run_name: str | None = None, **overrides: Any) -> Run:
    """Continue a run from a checkpoint, as `rltrain resume --checkpoint CHECKPOINT` does.

    `overrides` change config keys as `--set` does (keys that size the checkpoint, such as
    env_name or seed, cannot change); `run_name` forks the run into new folders instead of
    continuing in its own. Raises `CheckpointError` for a missing, corrupt or unsuitable
    checkpoint, `ConfigError` or `UserError` for a change that cannot apply.
    """
    from rltrain.scripts.training.resume import prepare_resume
    from rltrain.utils.config.resolve import override_strings

    trainer, paths, info = prepare_resume(str(checkpoint), override_strings(overrides),
                                          run_name)
    return _supervised(trainer, paths, info)


def _supervised(trainer: Any, paths: RunPaths, info: Any) -> Run:
    from rltrain.scripts.training.outcome import resume_hint
    from rltrain.scripts.training.wait import supervise
    from rltrain.utils.run.progress import say

    def announce(outcome: RunOutcome) -> None:  # before an `on_pause: wait` wait
        say(f"paused at step {outcome.env_steps} [{outcome.rule}]: {outcome.reason}")
        hint = resume_hint(outcome)
        if hint is not None:
            say(hint)

    return _run_of(supervise(trainer, paths, info, False, announce), paths)


def _run_of(outcome: RunOutcome, paths: RunPaths) -> Run:
    from rltrain.utils.run.folders import STATUS_FILE
    from rltrain.utils.run.status import read_status

    best = (read_status(paths.log_dir / STATUS_FILE) or {}).get("best_eval")
    if isinstance(best, str):  # status.json holds NaN/inf as "nan", "inf", "-inf"
        best = float(best)
    return Run(paths.name, outcome.status, outcome.env_steps, outcome.checkpoint,
               paths.log_dir, paths.checkpoint_dir, outcome.reason,
               None if best is None else float(best))


class Policy:
    """A trained actor, on the CPU, as `rltrain eval` runs it (no exploration noise)."""

    def __init__(self, actor: Actor, obs_dim: int, env_name: str, checkpoint: Path,
                 normalizer: Normalizer | None = None) -> None:
        self.actor, self.obs_dim = actor, obs_dim
        self.env_name, self.checkpoint = env_name, checkpoint
        self.normalizer = normalizer  # the run's frozen statistics (normalize.observations)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, None]:
        """The action for one observation `[obs_dim]`, or actions `[n, action_dim]` for a
        batch `[n, obs_dim]`, within the env's action bounds; and None (no recurrent state),
        as Stable-Baselines3's `predict`. The policy is deterministic, so `deterministic`,
        `state` and `episode_start` change nothing. A wrong shape raises `UserError`."""
        import numpy as np
        import torch

        obs = np.asarray(observation, dtype=np.float32)
        if obs.ndim not in (1, 2) or obs.shape[-1] != self.obs_dim:
            raise UserError(f"observation of shape {obs.shape}: this policy ({self.env_name}) "
                            f"takes [{self.obs_dim}] or a batch [n, {self.obs_dim}]")
        if self.normalizer is not None:
            obs = self.normalizer.observation(obs)
        with torch.inference_mode():
            actions = self.actor(torch.as_tensor(obs).reshape(-1, self.obs_dim)).numpy()
        return (actions[0] if obs.ndim == 1 else actions), None


def load_policy(checkpoint: str | Path) -> Policy:
    """The policy of a checkpoint written by rltrain (best_model.pt, checkpoint_step_N.pt,
    paused_at_step_N.pt), built as `rltrain eval` builds it; no env is made. Raises
    `CheckpointError` for a missing, corrupt or unsafe checkpoint."""
    from rltrain.scripts.training.agent_setup import checkpoint_actor, checkpoint_config
    from rltrain.utils.io.checkpoint import load_checkpoint
    from rltrain.utils.training.normalize import normalizer_from_checkpoint

    payload = load_checkpoint(checkpoint)
    config = checkpoint_config(payload, checkpoint)
    return Policy(checkpoint_actor(payload, config, checkpoint),
                  int(payload["spaces"]["obs_dim"]), config.env_name, Path(checkpoint),
                  normalizer_from_checkpoint(payload, config.normalize, config.gamma))


def diagnose(run: str | Path | Run, log_dir: str | Path = "logs") -> list[dict[str, Any]]:
    """The findings `rltrain diagnose RUN --json` reports, most severe first: each a dict
    with "rule", "step", "evidence", "severity" ("pause", "warning" or "info") and
    "message". `run`: a `Run`, a run folder, or a run name under `log_dir`. Writes
    nothing (no report.html). Raises `UserError` when the run is not found."""
    from rltrain.utils.diagnosis.report import findings
    from rltrain.utils.run.folders import find_run_log_dir

    folder = run.log_dir if isinstance(run, Run) else find_run_log_dir(str(run), str(log_dir))
    return findings.diagnose(Path(folder))["findings"]
