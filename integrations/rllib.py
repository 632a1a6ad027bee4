"""rltrain's health rules and flow-1 diagnostics on RLlib's SAC, PPO and DQN (new API
stack; SAC in a 1-D Box action space, PPO and DQN in a Discrete one).

    config = SACConfig().environment("Pendulum-v1").callbacks(
        rltrain_callback(run_name="sac_pendulum", max_timesteps=20_000))
    algo = config.build_algo()
    while not (result := algo.train())["rltrain"]["should_stop"]:
        pass

RLlib builds its callback class itself, in the algorithm and in each env runner, so
`rltrain_callback(...)` returns a class that carries the settings (and the `Recorder`
its instances share: integrations/rllib_record.py). After each `train()` iteration
(`on_train_result`) the algorithm's instance tells the run shell (integrations/
session.py) of the iteration's env steps, then of its updates (the losses RLlib's
learner reported for the iteration, the gradients as each optimiser stepped with them),
then what is due: the hooks judge once per iteration, with the weights at its end.
What it sees of each algorithm is integrations/rllib_models.py's. The run's folder,
status and rules are those of every rltrain run, so `rltrain status`, `diagnose` and
`pause` work on it. A pause (a rule, or `rltrain pause RUN`) saves the algorithm with
`save_to_path` at the end of the iteration, the safe point for each algorithm (PPO's
rollout trained on, no update half done), and sets `result["rltrain"]["should_stop"]`;
`Algorithm.from_checkpoint` restores it, and the restored algorithm (whose config holds
this callback) continues the run's folder.
Needs the learner in this process (`num_learners=0`, RLlib's default) and one env per
env runner; remote env runners (`num_env_runners` > 0) send their episodes back when
the iteration ends, each runner's env one of the run's training envs.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, Mapping

import numpy as np

try:
    import ray
    from ray.rllib.callbacks.callbacks import RLlibCallback
except ImportError:
    raise ImportError('rltrain.integrations.rllib needs RLlib: pip install "rltrain[rllib]"'
                      ) from None

from rltrain.integrations.continued import Continuation, check_continuable, from_logs
from rltrain.integrations.rllib_keys import RLlibKeys
from rltrain.integrations.rllib_models import (
    Watched,
    check_spaces,
    rows_per_update,
    watched,
)
from rltrain.integrations.rllib_record import Chunk, Recorder, take_recorded
from rltrain.integrations.rllib_settings import check_algorithm, rllib_config
from rltrain.integrations.rllib_view import learner_metrics
from rltrain.integrations.session import Session, session_config
from rltrain.integrations.views import StepGradients
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.progress import say
from rltrain.utils.run.status import read_status
from rltrain.utils.seeding import REPLAY, derive_seed
from rltrain.utils.training.replay_buffer import ReplayBuffer

LIBRARY = "ray.rllib"  # how status.json's `integration` begins
MODULE = "default_policy"  # RLlib's DEFAULT_MODULE_ID: a single-agent algorithm's module


def rltrain_callback(run_name: str | None = None, log_dir: str = "logs",
                     checkpoint_dir: str = "checkpoints", max_timesteps: int | None = None,
                     config: Mapping[str, Any] | None = None) -> type[RltrainRLlibCallback]:
    """The callback class to give `AlgorithmConfig.callbacks(...)`: it writes
    `<log_dir>/<run_name>/`. `max_timesteps`: the env steps the run is to take (its
    progress; once they are done the run is finished and `should_stop` set);
    `config`: rltrain config keys for the rules (`monitor`, `diagnostics`, ...)."""
    settings = {"run_name": run_name, "log_dir": log_dir, "checkpoint_dir": checkpoint_dir,
                "max_timesteps": max_timesteps, "config": dict(config or {})}
    return type("RltrainRLlibCallback", (RltrainRLlibCallback,),
                {"settings": settings, "recorder": Recorder(),
                 "__module__": RltrainRLlibCallback.__module__})


class RltrainRLlibCallback(RLlibCallback):
    """Made by `rltrain_callback`, which sets `settings` and `recorder`."""

    settings: dict[str, Any] = {}
    recorder: Recorder

    def __init__(self) -> None:
        super().__init__()
        self.algorithm: Any = None
        self.name = ""  # the algorithm's: SAC, PPO or DQN
        self.session: Session | None = None
        self.restored = False
        self.stopped = False  # the run ended (paused or finished): iterations unwatched
        self.checkpoint: str | None = None  # a pause's

    # ------------------------------------------------------- the env runner's side
    def on_sample_end(self, *, env_runner: Any = None, samples: Any = None,
                      **kwargs: Any) -> None:
        if env_runner is not None and samples:
            self.recorder.sampled(env_runner, samples)

    # -------------------------------------------------------- the algorithm's side
    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        self.name = check_algorithm(algorithm)
        self.algorithm = algorithm
        check_spaces(self.name, *self._spaces())
        # The rltrain keys checked now: a mistake fails build_algo(), not a train() later.
        self._config(0)

    def on_checkpoint_loaded(self, *, algorithm: Any, **kwargs: Any) -> None:
        self.restored = True  # the first iteration continues the run (from the checkpoint)

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        chunks, epsilon = self._take_chunks()
        if self.stopped:
            self.recorder.take_evaluations()
            result["rltrain"] = self._report()
            return
        steps = sum(len(chunk.rewards) for _, chunk in chunks)
        if self.session is None:
            self._open(result, steps)
        s = self.session
        try:
            for env, chunk in chunks:
                self._tell_chunk(env, chunk)
            self._tell_updates(result, [chunk for _, chunk in chunks], epsilon)
            s.step_end()
            self._tell_evaluation()
        except BaseException:
            self._close("crashed")
            raise
        if s.pause is not None:
            self._pause()
        elif s.env_steps >= s.config.max_timesteps:
            self._close("finished")
        result["rltrain"] = self._report()

    def _take_chunks(self) -> tuple[list[tuple[int, Chunk]], float | None]:
        """The iteration's training chunks, each with its env (its env runner's index),
        and the epsilon its env runners explore with now (the largest: the rule asks
        whether exploration has ended; None without one): from this process's Recorder,
        or from each remote env runner's."""
        local = [(0, chunk) for chunk in self.recorder.take_chunks()]
        if not self.algorithm.config.num_env_runners:
            return local, self.recorder.epsilon
        # (the local env runner does not sample for training beside remote ones)
        taken = self.algorithm.env_runner_group.foreach_env_runner(
            functools.partial(take_recorded, base=RltrainRLlibCallback),
            local_env_runner=False)
        rates = [epsilon for _, _, epsilon in taken if epsilon is not None]
        return ([(index - 1, chunk) for index, chunks, _ in taken for chunk in chunks],
                max(rates) if rates else None)

    # ------------------------------------------------------------------ set-up
    def _spaces(self) -> tuple[Any, Any]:
        module = self._module()
        return module.observation_space, module.action_space

    def _module(self) -> Any:
        """The learner's RLModule: the one that trains (the env runner's is a copy); the
        learner is in this process (`check_algorithm`), so this is the module itself."""
        results = self.algorithm.learner_group.foreach_learner(
            lambda learner: learner.module[MODULE])
        return next(iter(results)).get()

    def _config(self, start: int) -> TrainConfig:
        config, s = self.algorithm.config, self.settings
        env = config.env if isinstance(config.env, str) else "unknown"
        limit = s["max_timesteps"] or s["config"].get("max_timesteps")
        total = int(limit) if limit else start + 200_000
        derived = {**rllib_config(config, self.name, env, total), "run_name": s["run_name"],
                   "log_dir": s["log_dir"], "checkpoint_dir": s["checkpoint_dir"]}
        return session_config(s["config"], derived)

    def _open(self, result: dict, steps: int) -> None:
        """The session, at the first iteration: a new run, or (the algorithm restored
        from a checkpoint) the run of that name going on from the checkpoint's step."""
        lifetime = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
        start = lifetime - steps  # the env steps before this iteration's
        config = self._config(start)
        obs_dim, action_dim = check_spaces(self.name, *self._spaces())
        self.watched: Watched = watched(
            self.name, self._module(), self.algorithm.config, config,
            lambda: self.session.updates if self.session is not None else 0)
        view = self.watched.view
        self.step_gradients = StepGradients({"actor": view.actor, "critic": view.critic},
                                            trace_backwards=False)  # RLlib's own update
        view = dataclasses.replace(view, step_gradients=self.step_gradients.gradients)
        self.buffer = ReplayBuffer(self.watched.kept_rows, obs_dim, action_dim, view.device,
                                   seed=derive_seed(config.seed, REPLAY))
        integration = f"{LIBRARY} {ray.__version__} {self.name}"
        keys = RLlibKeys(self.name, config.batch_size, config.max_timesteps, config.library)
        try:
            self.session = Session(config, view, self.buffer, obs_dim, self._save,
                                   integration, noise=float("nan"), env_steps=start,
                                   updates=self._updates_before(result),
                                   continued=self._continuation(config, start),
                                   translate=keys.finding)
        except BaseException:
            self.step_gradients.close()
            raise
        # The run's name (chosen by rltrain where none was given) on the class itself: a
        # checkpoint's config keeps the class, and its restored algorithm continues the run.
        type(self).settings = {**self.settings, "run_name": self.session.paths.name}

    def _continuation(self, config: TrainConfig, start: int) -> Continuation | None:
        """How an algorithm restored from a checkpoint (one that sampled env steps before
        its first watched iteration) continues the run of its name; None: a new run."""
        if not (self.restored or start > 0) or config.run_name is None:
            return None
        name = config.run_name
        paths = RunPaths(name, Path(config.log_dir) / name, Path(config.checkpoint_dir) / name)
        if read_status(paths.status_file) is None:
            return None  # a new run, from the algorithm's step
        how = ("restore its algorithm (Algorithm.from_checkpoint) and train() on, or "
               "choose another run_name")
        check_continuable(paths, LIBRARY, how)
        return from_logs(paths, start, "an algorithm restored from its checkpoint")

    def _updates_before(self, result: dict) -> int:
        learner = result.get("learners", {}).get(MODULE, {})
        lifetime = int(learner.get("num_module_steps_trained_lifetime", 0) or 0)
        now = int(learner.get("num_module_steps_trained", 0) or 0)
        return max(lifetime - now, 0) // rows_per_update(self.algorithm.config, self.name)

    # ------------------------------------------------------------ each iteration
    def _tell_chunk(self, env: int, chunk: Chunk) -> None:
        """One episode chunk, step by step, as an env loop would have told it."""
        s = self.session
        actions = self.watched.to_env(chunk.actions)  # as the env got them, [T, action_dim]
        last = len(chunk.rewards) - 1
        for t in range(last + 1):
            obs, next_obs = chunk.obs[t], chunk.obs[t + 1]
            reward = float(chunk.rewards[t])
            terminated = chunk.terminated and t == last
            truncated = chunk.truncated and t == last
            s.sample_env(env, obs)
            if np.isfinite(next_obs).all() and np.isfinite(actions[t]).all() \
                    and np.isfinite(reward):
                self.buffer.add(obs, actions[t], reward, next_obs, terminated, truncated)
            s.step(env, obs, actions[t], reward, next_obs, terminated, truncated)

    def _tell_evaluation(self) -> None:
        """RLlib's evaluation episodes of the iteration (its evaluation env runner is in
        this process too, `evaluation_num_env_runners=0`): their returns and lengths, as
        an evaluation of the run (no start states: the Q check does not judge them)."""
        episodes = self.recorder.take_evaluations()
        if not episodes:
            return
        returns, lengths = zip(*episodes, strict=True)
        empty = np.zeros((0, self.buffer.obs_dim), np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.session.evaluated(EvalResult(list(returns), list(lengths), [], empty,
                                              empty, []))

    def _tell_updates(self, result: dict, chunks: list[Chunk], epsilon: float | None) -> None:
        """The iteration's updates: each with the learner's reported losses (RLlib's
        values for the iteration; PPO's step measured on the iteration's `chunks`, DQN's
        `epsilon`) and the gradients of the latest optimiser steps."""
        learner = result.get("learners", {}).get(MODULE)
        if not learner:
            return
        trained = int(learner.get("num_module_steps_trained", 0) or 0)
        updates = trained // rows_per_update(self.algorithm.config, self.name)
        if updates <= 0:
            return
        metrics = self.watched.metrics(learner, chunks, epsilon)
        metrics.update(self.step_gradients.norms())
        self.session.update(metrics, count=updates)

    def _report(self) -> dict[str, Any]:
        """What `result["rltrain"]` holds for the user's loop."""
        s = self.session
        return {"run": self.settings["run_name"], "should_stop": self.stopped,
                "env_steps": s.env_steps if s is not None else 0,
                "state": "paused" if self.checkpoint else
                ("finished" if self.stopped else "running"),
                "checkpoint": self.checkpoint}

    # ------------------------------------------------------------------ endings
    def _save(self, paths: RunPaths, kind: str, env_steps: int) -> Path:
        name = "best_checkpoint" if kind == "best" else f"paused_at_step_{env_steps}"
        path = paths.checkpoint_dir / name
        self.algorithm.save_to_path(str(path.resolve()))
        return path

    def _pause(self) -> None:
        s = self.session
        assert s is not None and s.pause is not None
        finding = s.pause
        path = s.pause_run(self.continue_with)
        self.checkpoint = str(path)
        self._close("paused")
        say(f"paused at step {s.env_steps} [{finding.rule}]: {finding.message}\n"
            + self.continue_with(path))

    def continue_with(self, path: Path) -> str:
        """The checkpoint a pause wrote and the RLlib lines that continue the run."""
        return (f"  checkpoint: {path}\n"
                f"  once the cause is fixed, continue the run with:\n"
                f"    algo = Algorithm.from_checkpoint(\"{Path(path).resolve()}\")\n"
                f"    result = algo.train()  # its config's callback continues run "
                f"\"{self.settings['run_name']}\"")

    def _close(self, state: str) -> None:
        self.stopped = True
        if self.session is not None and not self.session.closed:
            self.session.close(state)
        if self.session is not None:
            self.step_gradients.close()

    def finish(self) -> None:
        """End the run as finished before `max_timesteps` (the loop stopped early)."""
        if not self.stopped:
            self._close("finished")


def finish(algorithm: Any) -> None:
    """End the rltrain run of `algorithm` as finished (a loop that stops before the
    callback's `max_timesteps`); nothing when the run ended already."""
    for callback in getattr(algorithm, "callbacks", None) or []:
        if isinstance(callback, RltrainRLlibCallback):
            callback.finish()


__all__ = ["RltrainRLlibCallback", "check_algorithm", "finish",
           "learner_metrics", "rltrain_callback"]
