"""A trainer's complete state as a checkpoint payload, and its exact restoration.

A periodic or paused checkpoint holds everything needed to continue bit-for-bit:
networks, targets, optimisers, the replay buffer's filled part, every random state
(agent, replay sampling, exploration, Python, NumPy, torch), the counters, the loss
window being averaged for the next log line, and each training env's episode in
progress. The envs themselves are not pickled: scripts/collector.py rebuilds them by
replaying each episode's actions from its seeded reset. `best_model.pt` (kind "best")
holds the agent only (networks, targets, optimisers), without the replay buffer and the
rest, and cannot be resumed.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rltrain import __version__
from rltrain.agents.probes import gradient_probe
from rltrain.utils.checkpoint import check_spaces
from rltrain.utils.config import config_to_dict
from rltrain.utils.envs import space_record
from rltrain.utils.errors import CheckpointError, EnvFailure
from rltrain.utils.findings import Finding
from rltrain.utils.run_environment import environment_record, environment_warning
from rltrain.utils.run_metrics import recent_episodes

if TYPE_CHECKING:
    from rltrain.scripts.trainer import Trainer

RESUMABLE_KINDS = ("periodic", "paused")


@dataclass(frozen=True)
class ResumeInfo:
    """How a run continues: from which checkpoint and step, with which changes."""

    env_steps: int
    checkpoint: str
    changes: list[str]
    warnings: list[str]
    forked_from: str | None = None


@dataclass
class Counters:
    env_steps: int = 0
    episodes: int = 0  # completed training episodes
    last_return: float | None = None  # of the latest completed episode
    last_non_finite_rewards: int = 0  # NaN/inf rewards left out of that return


def build_payload(trainer: Trainer, kind: str) -> dict[str, Any]:
    """The checkpoint dict for `kind` in ("best", "periodic", "paused")."""
    payload: dict[str, Any] = {
        **trainer.agent.state_dict(),
        "kind": kind,
        "total_steps": trainer.counters.env_steps,
        "config": config_to_dict(trainer.config),
        "run_name": trainer.paths.name,
        "log_dir": str(trainer.paths.log_dir.resolve()),  # resume finds it from any folder
        "checkpoint_dir": str(trainer.paths.checkpoint_dir.resolve()),  # a copy is not there
        "spaces": space_record(trainer.config.env_name, trainer.eval_env),
        "rltrain_version": __version__,
        "environment": environment_record(trainer.device),  # resume compares it
        "normalize": trainer.collector.normalizer.state_dict(),  # eval uses it frozen
    }
    if kind in RESUMABLE_KINDS:
        payload["buffer"] = trainer.buffer.state_dict()
        payload["trainer"] = _trainer_state(trainer)
    return payload


def _trainer_state(trainer: Trainer) -> dict[str, Any]:
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    return {
        "counters": dataclasses.asdict(trainer.counters),
        "redo_due": trainer.redo_due,  # what is due after the last env step, not yet done
        **trainer.collector.state_dict(trainer.action_dim),  # episodes, pending, unstepped
        "exploration": trainer.exploration.state_dict(),
        "monitor": trainer.monitor.state_dict(),
        "diagnostics": trainer.diagnostics.state_dict(),
        "rule_hooks": {hook.name: hook.state_dict() for hook in trainer.rule_hooks},
        "losses": {k: list(v) for k, v in trainer.loss_window.items()},
        "recent_episodes": [list(x) for x in trainer.recent_episodes],  # (return, length)
        "rng": {"python": random.getstate(), "numpy": numpy_state,
                "torch": torch.get_rng_state()},
    }


def check_resumable(payload: dict[str, Any], path: str) -> None:
    if payload.get("kind") not in RESUMABLE_KINDS:
        raise CheckpointError(f"'{path}' holds a model only (kind {payload.get('kind')!r}); "
                              "resume from a checkpoint_step_* or paused_at_step_* file")


def restore(trainer: Trainer, payload: dict[str, Any], path: str) -> list[str]:
    """Load a resumable payload into a freshly built trainer; returns warnings. A payload
    whose parts do not fit the trainer (edited, or from an incompatible version) is a
    `CheckpointError` naming the first mismatch."""
    check_resumable(payload, path)
    check_spaces(payload, space_record(trainer.config.env_name, trainer.eval_env), path)
    found = environment_warning(payload.get("environment"), environment_record(trainer.device))
    try:
        return ([found] if found else []) + _restore(trainer, payload)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as exc:
        lines = str(exc).strip().splitlines()  # torch names the mismatch on the last line
        what = f"missing entry {exc}" if isinstance(exc, KeyError) else (
            lines[-1].strip() if lines else type(exc).__name__)
        raise CheckpointError(f"checkpoint '{path}' does not fit this run: {what}") from None
    except EnvFailure as exc:
        raise EnvFailure(f"{exc}; the checkpoint '{path}' is unchanged", exc.details) from None


def _restore(trainer: Trainer, payload: dict[str, Any]) -> list[str]:
    if payload["buffer"]["capacity"] != trainer.buffer.capacity:
        raise CheckpointError("replay_buffer_size cannot change on resume "
                              f"({payload['buffer']['capacity']} in the checkpoint)")
    state = payload["trainer"]
    if "episode" in state:  # written before num_envs: one env, nothing pending
        state = {**state, "episodes": [state["episode"]], "pending": []}
    continued = [trainer.agent.load_state_dict(payload),
                 trainer.buffer.load_state_dict(payload["buffer"])]
    trainer.counters = Counters(**state["counters"])
    trainer.redo_due = bool(state.get("redo_due", False))
    trainer.exploration.load_state_dict(state["exploration"])
    trainer.collector.normalizer.load_state_dict(payload.get("normalize"))
    trainer.monitor_state = state["monitor"]
    trainer.diagnostics_state = state["diagnostics"]
    trainer.rule_hooks_state = dict(state.get("rule_hooks", {}))  # none before utils/rules/
    trainer.loss_window = {k: list(v) for k, v in state["losses"].items()}
    # Written before rollout/ep_rew_mean: its mean starts over from the resumed step.
    trainer.recent_episodes = recent_episodes(state.get("recent_episodes", ()))
    rng = state["rng"]
    random.setstate(_as_tuple(rng["python"]))
    numpy_state = dict(rng["numpy"])
    numpy_state["state"] = {**numpy_state["state"],
                            "key": np.asarray(numpy_state["state"]["key"], dtype=np.uint32)}
    np.random.set_state(numpy_state)
    torch.set_rng_state(rng["torch"])
    warnings = [] if all(continued) else [
        "the checkpoint was written on another kind of device than this run's "
        f"({trainer.device.type}): replay sampling and target noise continue from new "
        "random streams, so the run goes on correctly but not bit-identically"]
    return warnings + trainer.collector.restore(state)


def _as_tuple(value: Any) -> Any:
    """`random.setstate` wants the exact nested tuples `getstate` gave."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuple(v) for v in value)
    return value


def resume_findings(trainer: Trainer) -> list[Finding]:
    """On resume, every rule checked against the restored state, so that a rule that
    paused the run and still fails pauses it again at once, saying so."""
    rules, steps = trainer.rules, trainer.counters.env_steps
    found = rules.check_patience(steps, trainer.monitor.evals_since_best)
    if trainer.counters.last_return is not None:
        found += rules.check_episode(steps, trainer.counters.last_return)
    if not trainer.agent.parameters_finite():
        found += rules.fire("non_finite", steps, "parameters",
                            "the network parameters contain NaN/inf", on_weights=True)
    if len(trainer.buffer):
        batch = trainer.buffer.newest(trainer.config.batch_size)
        found += rules.check_update(steps, gradient_probe(trainer.agent, batch).health_metrics(),
                                    probe=True)
    found += rules.check_memory(steps)
    for episode in trainer.collector.episodes:
        found += rules.check_transition(steps, np.asarray(episode.obs),
                                        np.zeros(trainer.action_dim), 0.0)[0]
    return [dataclasses.replace(f, message="still failing after resume: " + f.message)
            for f in found]
