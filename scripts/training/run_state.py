"""One run's state: what a checkpoint holds, and the env steps and updates that change it.

`RunState` owns everything that must continue bit for bit after a pause: the agent
(networks, targets, optimisers), the replay buffer, the exploration noise, the training
envs and their episodes in progress (the Collector), the counters, every random state
(agent, replay sampling, exploration, Python, NumPy, torch) and the state of whatever
watches the run (the monitor and the hooks), which register with `watch`. Its
`state_dict(kind)` is the checkpoint and `load_state_dict` restores one exactly into a
freshly built state; nothing else assembles a checkpoint.

The envs themselves are not pickled: the Collector rebuilds them by replaying each
episode's actions from its seeded reset. `best_model.pt` (kind "best") holds the agent
only and cannot be resumed.

It also takes the env steps and the updates (`env_step`, `learn`), each returning the
record the hooks are told of, so that the loop (scripts/training/trainer.py) is only the
order of things and the ways a run ends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rltrain.agents.probes import gradient_probe
from rltrain.agents.registry import algorithm
from rltrain.scripts.training.agent_setup import agent_view, build_agent, network_spec
from rltrain.scripts.workers.distributed import make_collector
from rltrain.utils.config.schema import TrainConfig, config_to_dict, evaluation_env_kwargs
from rltrain.utils.errors import CheckpointError, ConfigError, EnvFailure, first_line
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Step, Update
from rltrain.utils.io.checkpoint import check_spaces, checkpoint_algo
from rltrain.utils.run.device import check_network_memory, default_threads, tune_process
from rltrain.utils.run.environment import environment_record, environment_warning
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.health import HealthRules, is_finite
from rltrain.utils.run.shell import (
    Counters,
    count_step,
    counters_status,
    next_episode_index,
)
from rltrain.utils.seeding import (
    AGENT,
    EXPLORATION,
    NETWORK_INIT,
    REPLAY,
    derive_seed,
    global_rng_state,
    seed_global_generators,
    set_global_rng_state,
)
from rltrain.utils.training.envs import make_env, space_dims, space_record
from rltrain.utils.training.evaluation import evaluate
from rltrain.utils.training.exploration import Exploration
from rltrain.utils.training.replay_buffer import ReplayBuffer
from rltrain.utils.version import __version__

RESUMABLE_KINDS = ("periodic", "paused")


@dataclass(frozen=True)
class ResumeInfo:
    """How a run continues: from which checkpoint and step, with which changes."""

    env_steps: int
    checkpoint: str
    changes: list[str]
    warnings: list[str]
    forked_from: str | None = None
    reseeded: int | None = None  # a re-seeded fork's seed (RunState.reseed)

    def describe(self) -> str:
        changes = ", ".join(self.changes) or "no changes"
        origin = f" of run '{self.forked_from}'" if self.forked_from else ""
        origin += f", re-seeded with {self.reseeded}" if self.reseeded is not None else ""
        return f"resumed from {self.checkpoint}{origin} ({changes})"


def check_same_spaces(config: TrainConfig, eval_env: Any) -> None:
    """eval_env_kwargs may change the evaluation env's reward or time limit, never what
    the networks see and do: its spaces must be the training env's."""
    train_env = make_env(config.env_name, env_kwargs=config.env_kwargs)
    try:
        same = (train_env.observation_space == eval_env.observation_space
                and train_env.action_space == eval_env.action_space)
    finally:
        train_env.close()
    if not same:
        eval_env.close()
        raise ConfigError(f"eval_env_kwargs {config.eval_env_kwargs} changes the env's "
                          "observation or action space: it may change only what does not "
                          "(a reward weight, the time limit)")


class RunState:
    """A run's agent, replay buffer, envs, counters and watchers' state."""

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        self.config, self.device = config, device
        widths = [network_spec(config, net).hidden_sizes for net in ("actor", "critic")]
        tune_process(config.torch_threads if config.torch_threads is not None
                     else default_threads(widths, device))
        seed_global_generators(config.seed)
        # First: a bad env fails here, in-process.
        self.eval_env = make_env(config.env_name, env_kwargs=evaluation_env_kwargs(config))
        if config.eval_env_kwargs:
            check_same_spaces(config, self.eval_env)
        self.obs_dim, self.action_dim, low, high = space_dims(self.eval_env)
        check_network_memory(self.obs_dim, self.action_dim,
                             network_spec(config, "actor").hidden_sizes,
                             network_spec(config, "critic").hidden_sizes, device,
                             algorithm(config.algo).targets)
        torch.manual_seed(derive_seed(config.seed, NETWORK_INIT))
        self.agent, self.backend_warning = build_agent(config, self.obs_dim, low, high, device)
        self.view = agent_view(self.agent, low, high)  # what the hooks see of the agent
        self.buffer = ReplayBuffer(config.replay_buffer_size, self.obs_dim, self.action_dim,
                                   device, seed=derive_seed(config.seed, REPLAY))
        self.action_noise = algorithm(config.algo).adds_action_noise
        self.exploration = Exploration(config, low, high, derive_seed(config.seed, EXPLORATION),
                                       self.action_noise)
        self.collector = make_collector(config, self.exploration, self.agent.actor,
                                        self.action_noise)
        self.collector.updates = lambda: self.agent.updates  # when to send weights
        self.eval_env = self.collector.normalizer.frozen_env(self.eval_env)  # normalize.*
        self.counters = Counters()
        self.redo_due = False  # what is due after the last env step, not yet done
        self.in_env_step = False  # a failure now leaves the step's bookkeeping half done
        self.paths: RunPaths | None = None  # the run's folders, once it has them
        self.watchers: dict[str, tuple[Any, bool]] = {}  # name -> (watcher, spread)
        self.restored: dict[str, Any] = {}  # watchers' states from a checkpoint
        self.restored_from = ""  # that checkpoint's path

    def watch(self, name: str, watcher: Any, spread: bool = False) -> None:
        """Keep `watcher.state_dict()` in checkpoints under `name` (`spread`: its keys
        directly), and give it the state a restored checkpoint holds for it."""
        self.watchers[name] = (watcher, spread)
        state = self.restored.get(name)
        if not state:
            return
        try:
            watcher.load_state_dict(state)
        except MISFITS as exc:
            raise CheckpointError(f"checkpoint '{self.restored_from}' does not fit this run: "
                                  f"its {name} state: {misfit(exc)}") from None

    def close(self) -> list[str]:
        """Close the envs (async vector envs run worker processes). An exception from an
        env's own `close` does not change how the run ended: it is returned, one line
        each, for the caller to report."""
        problems = []
        for which, close in (("training env", self.collector.close),
                             ("evaluation env", self.eval_env.close)):
            try:
                close()
            except Exception as exc:  # noqa: BLE001 (the env's own code)
                problems.append(f"the {which}'s close() raised {type(exc).__name__}: "
                                f"{first_line(exc)}")
        return problems

    # ------------------------------------------------------- steps and updates
    def env_step(self) -> Step:
        """The next transition, stored in the replay buffer if it is finite."""
        t = self.collector.next(self.counters.env_steps, self._explore)  # raises: no change
        self.in_env_step = True
        self.counters.env_steps += 1
        stored = is_finite(t.next_obs, t.action, t.reward)
        if stored:
            self.buffer.add(t.obs, t.action, t.stored_reward, t.next_obs, t.terminated,
                            t.truncated)
        return Step(self.counters.env_steps, t.env, t.obs, t.action, t.reward, t.next_obs,
                    t.terminated, t.truncated, stored, t.noise, t.steered)

    def _explore(self, obs: np.ndarray) -> np.ndarray:
        """The policy's actions for the collector to explore with: deterministic where the
        configured noise is added to them, sampled where the policy explores itself."""
        actions = self.agent.act(obs, deterministic=self.action_noise)
        if not self.action_noise:  # its own noise and mean action, where it keeps them
            self.collector.exploration.drawn = self.agent.drawn
        return actions

    def count_step(self, step: Step) -> EpisodeEnd | None:
        """Add the step to its episode; the episode's end, if it ended."""
        # A broken env state (a non-finite observation) ends the episode here.
        truncated = step.truncated or (not step.stored and not np.isfinite(step.next_obs).all())
        return count_step(self.counters, self.collector.episodes[step.env], step,
                          ended=step.terminated or truncated)

    def end_episode(self, env: int) -> None:
        """Env `env`'s episode has ended: the next is recorded, its reset made by
        `start_episode` once the step's updates and due work are done (a reset that
        raises then stops the run with a checkpoint of the whole step)."""
        self.collector.end(env, next_episode_index(self.counters, self.collector.num_envs))

    def start_episode(self, env: int) -> None:
        self.collector.start_next(env)

    def status(self) -> dict[str, Any]:
        """The counters (and the env runners', with num_workers), as status.json shows them."""
        return {**counters_status(self.counters, self.agent.updates), **self.collector.status()}

    def learning(self) -> bool:
        return (self.counters.env_steps >= self.config.learning_starts
                and len(self.buffer) >= self.config.batch_size)

    def learn(self) -> Update:
        metrics = self.agent.update(self.buffer.sample(self.config.batch_size))
        # One host transfer per update, for all the metrics.
        values = dict(zip(metrics, torch.stack(list(metrics.values())).tolist(), strict=True))
        return Update(self.counters.env_steps, self.agent.updates, values)

    def evaluate(self) -> EvalResult:
        config = self.config
        return evaluate(self.agent.act, self.eval_env, config.n_eval_episodes, config.seed,
                        config.gamma, env_name=config.env_name)

    # ---------------------------------------------------------- checkpoints
    def state_dict(self, kind: str) -> dict[str, Any]:
        """The checkpoint for `kind` in ("best", "periodic", "paused")."""
        assert self.paths is not None, "a run's state is saved once it has its folders"
        payload: dict[str, Any] = {
            **self.agent.state_dict(),
            "algo": self.config.algo,  # which algorithm's state this is (agents/registry.py)
            "kind": kind,
            "total_steps": self.counters.env_steps,
            "config": config_to_dict(self.config),
            "run_name": self.paths.name,
            "log_dir": str(self.paths.log_dir.resolve()),  # resume finds it from any folder
            "checkpoint_dir": str(self.paths.checkpoint_dir.resolve()),  # a copy is not there
            "spaces": space_record(self.config.env_name, self.eval_env),
            "rltrain_version": __version__,
            "environment": environment_record(self.device),  # resume compares it
            "normalize": self.collector.normalizer.state_dict(),  # eval uses it frozen
        }
        if kind in RESUMABLE_KINDS:
            payload["buffer"] = self.buffer.state_dict()
            payload["trainer"] = self._run_state()
        return payload

    def _run_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "counters": dataclasses.asdict(self.counters),
            "redo_due": self.redo_due,
            **self.collector.state_dict(self.action_dim),  # episodes, pending, unstepped
            "exploration": self.exploration.state_dict(),
            "rng": global_rng_state(),
        }
        for name, (watcher, spread) in self.watchers.items():
            part = watcher.state_dict()
            state.update(part) if spread else state.__setitem__(name, part)
        return state

    def load_state_dict(self, payload: dict[str, Any], path: str) -> list[str]:
        """Load a resumable checkpoint into this freshly built state; returns warnings. A
        payload whose parts do not fit (edited, or from an incompatible version) is a
        `CheckpointError` naming the first mismatch."""
        check_resumable(payload, path)
        check_algorithm(payload, self.config.algo, path)
        check_spaces(payload, space_record(self.config.env_name, self.eval_env), path)
        found = environment_warning(payload.get("environment"), environment_record(self.device))
        self.restored_from = path
        try:
            return ([found] if found else []) + self._restore(payload)
        except MISFITS as exc:
            raise CheckpointError(f"checkpoint '{path}' does not fit this run: "
                                  f"{misfit(exc)}") from None
        except EnvFailure as exc:
            raise EnvFailure(f"{exc}; the checkpoint '{path}' is unchanged", exc.details) from None

    def _restore(self, payload: dict[str, Any]) -> list[str]:
        if payload["buffer"]["capacity"] != self.buffer.capacity:
            raise CheckpointError("replay_buffer_size cannot change on resume "
                                  f"({payload['buffer']['capacity']} in the checkpoint)")
        state = payload["trainer"]
        if "episode" in state:  # written before num_envs: one env, nothing pending
            state = {**state, "episodes": [state["episode"]], "pending": []}
        continued = [self.agent.load_state_dict(payload),
                     self.buffer.load_state_dict(payload["buffer"])]
        self.counters = Counters(**state["counters"])
        self.redo_due = bool(state.get("redo_due", False))
        self.exploration.load_state_dict(state["exploration"])
        self.collector.normalizer.load_state_dict(payload.get("normalize"))
        self.restored = {"monitor": state["monitor"], "diagnostics": state["diagnostics"],
                         "metrics": {"losses": state["losses"],
                                     "recent_episodes": state.get("recent_episodes", ())},
                         "rule_hooks": state.get("rule_hooks", {}),  # none in older checkpoints
                         "logger": state.get("logger", {})}  # metrics lines left unwritten
        set_global_rng_state(state["rng"])
        warnings = [] if all(continued) else [
            "the checkpoint was written on another kind of device than this run's "
            f"({self.device.type}): replay sampling and target noise continue from new "
            "random streams, so the run goes on correctly but not bit-identically"]
        return warnings + self.agent.restore_warnings() + self.collector.restore(state)

    def reseed(self, seed: int) -> None:
        """After a checkpoint is loaded: exploration noise, replay sampling, target noise,
        the global generators and the episodes to come continue from `seed` instead (a
        re-seeded fork). Evaluation keeps the run's seeds, so forks stay comparable."""
        seed_global_generators(seed)
        torch.manual_seed(derive_seed(seed, NETWORK_INIT))
        self.agent.reseed(derive_seed(seed, AGENT))
        self.buffer.generator.manual_seed(derive_seed(seed, REPLAY))
        self.exploration.reseed(derive_seed(seed, EXPLORATION))
        self.collector.reseed(seed)

    def restored_findings(self, rules: HealthRules, evals_since_best: int) -> list[Finding]:
        """On resume, every health rule checked against the restored state, so that a rule
        that paused the run and still fails pauses it again at once, saying so."""
        steps = self.counters.env_steps
        found = rules.check_patience(steps, evals_since_best)
        if self.counters.last_return is not None:
            found += rules.check_episode(steps, self.counters.last_return)
        found += rules.check_parameters(steps, self.agent.parameters_finite())
        if len(self.buffer):
            batch = self.buffer.newest(self.config.batch_size)
            found += rules.check_update(
                steps, gradient_probe(self.agent, batch).health_metrics(), probe=True)
        found += rules.check_memory(steps)
        for episode in self.collector.episodes:
            found += rules.check_transition(steps, np.asarray(episode.obs),
                                            np.zeros(self.action_dim), 0.0)[0]
        return [dataclasses.replace(f, message="still failing after resume: " + f.message)
                for f in found]


# What loading a state that does not fit raises (a missing key, a wrong shape or type).
MISFITS = (KeyError, IndexError, TypeError, ValueError, RuntimeError)


def misfit(exc: BaseException) -> str:
    """One of MISFITS in words: the missing key, or the error's last line (where torch
    names the mismatch)."""
    if isinstance(exc, KeyError):
        return f"missing entry {exc}"
    lines = str(exc).strip().splitlines()
    return lines[-1].strip() if lines else type(exc).__name__


def check_algorithm(payload: dict[str, Any], algo: str, path: str) -> None:
    """A checkpoint loads only into a run of the algorithm that wrote it."""
    written = checkpoint_algo(payload)
    if written != algo:
        raise CheckpointError(f"checkpoint '{path}' holds a {written} agent, and this run's "
                              f"config says algo {algo}: resume it with algo {written}, or "
                              f"start a new {algo} run")


def check_resumable(payload: dict[str, Any], path: str) -> None:
    if payload.get("kind") not in RESUMABLE_KINDS:
        raise CheckpointError(f"'{path}' holds a model only (kind {payload.get('kind')!r}); "
                              "resume from a checkpoint_step_* or paused_at_step_* file")
