"""RltrainCallback: rltrain's health rules and flow-1 diagnostics on a Stable-Baselines3
run: TD3, DDPG, SAC and sb3-contrib's CrossQ and TQC (Box action spaces); PPO and A2C
(Box or Discrete); DQN (Discrete); one or more envs.

    model.learn(50_000, callback=RltrainCallback(run_name="x", log_dir="logs"))

It writes rltrain's run folder (`rltrain status`, `diagnose` and `pause` work on it).
SB3 calls `_on_step` after each vector env step, before it stores the transition, and
trains between two collections of steps: so the first step after a training tells the
hooks of the updates made since the last one (losses from SB3's logger, gradients as
each optimiser stepped with them) and runs what is due by step count, then the steps
are told. The actor-critics' steps are told one by one (their exploration noise is read
from each acting pass); PPO's, A2C's and DQN's once per collection, at its last step,
before SB3 trains on them (sb3_rollouts.py), or at once where a step holds a NaN/inf.
A pause (a rule, or `rltrain pause RUN`) saves the model and its replay buffer with
SB3's own `save` and `save_replay_buffer`, records why, prints how to go on, and stops
`learn()` (`_on_step` returns False); the step it stopped at is then not in the saved
buffer, as with any callback that stops SB3. Asked from outside, PPO, A2C and DQN stop
at the first step of a collection, once the one before has been trained on (PPO's and
A2C's rollout buffer is not saved: a step in the middle would lose the rollout's steps,
not an update); a rule's pause stops them at the step it was judged at, PPO and A2C
dropping the rollout that holds what it found. The diagnostics keep PPO's and A2C's
latest transitions in a small buffer of their own.
Training goes on as SB3's does (integrations/continued.py): another `learn()` with the
callback, or a loaded model learning with a callback of the same run name, continues
the run's folder.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

try:
    import stable_baselines3
    from stable_baselines3.common.callbacks import BaseCallback
except ImportError:
    raise ImportError('rltrain.integrations.sb3 needs Stable-Baselines3: '
                      'pip install "rltrain[sb3]"') from None

from rltrain.agents.families import ON_POLICY
from rltrain.agents.registry import Algorithm
from rltrain.integrations.continued import Continuation, check_continuable, from_logs
from rltrain.integrations.sb3_env_watch import EnvWatch
from rltrain.integrations.sb3_models import (
    check_model,
    derived_config,
    env_rewards,
    reported,
    watched,
)
from rltrain.integrations.sb3_rollouts import StepBlock, collection_ends, transitions
from rltrain.integrations.sb3_settings import SB3Keys
from rltrain.integrations.sb3_taps import PolicyTap
from rltrain.integrations.session import Session, session_config
from rltrain.integrations.views import LeftGradients, StepGradients
from rltrain.utils.errors import UserError
from rltrain.utils.hooks.agent_view import ENDINGS
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.progress import say
from rltrain.utils.run.status import read_status
from rltrain.utils.training.replay_buffer import ReplayBuffer

LIBRARY = "stable-baselines3"  # how status.json's `integration` begins
TIMEOUT_FIX = ("train a new model with replay_buffer_kwargs=dict("
               "handle_timeout_termination=True) (which optimize_memory_usage=True rules "
               "out: turn that off)")
class RltrainCallback(BaseCallback):
    """Watches `learn()` and writes `<log_dir>/<run_name>/`; `config`: rltrain config
    keys for the rules (`monitor`, `diagnostics`, `eval_freq`, `n_eval_episodes`, ...);
    `eval_env`: a Gymnasium env for rltrain's evaluations every eval_freq env steps
    (early stopping, the Q check; none without it)."""

    def __init__(self, run_name: str | None = None, log_dir: str = "logs",
                 checkpoint_dir: str = "checkpoints",
                 config: Mapping[str, Any] | None = None, eval_env: gym.Env | None = None,
                 verbose: int = 0, model: Any = None) -> None:
        """`model` (optional): the model it will watch, checked here, so that one it does
        not watch (its algorithm, its action space) is refused at this line, before any
        training, rather than from inside `learn()`. Either way the refusal is a
        `ConfigError` whose message is the whole explanation, in one line."""
        if model is not None:
            check_model(model)
        super().__init__(verbose)
        self.folders = {"run_name": run_name, "log_dir": log_dir,
                        "checkpoint_dir": checkpoint_dir}
        self.user_config, self.eval_env = dict(config or {}), eval_env
        self.session: Session | None = None
        self.watched: Any = None  # the model whose run it is
        self.tap: PolicyTap | None = None  # the actor-critics' acting pass
        self.paused_files: tuple[Path, Path | None] | None = None  # model, replay buffer
        self._updates_seen = 0
        self.entry: Algorithm | None = None  # a watched-only algorithm (None: actor-critic)
        self.kept: ReplayBuffer | None = None  # PPO's, A2C's latest transitions
        # PPO's, A2C's and DQN's steps, told once per collection (None: at each step)
        self.block: StepBlock | None = None
        self._fresh = True  # the next step is a collection's first

    @property
    def family(self) -> str | None:
        return None if self.entry is None else self.entry.family

    def _init_callback(self) -> None:
        self.entry = check_model(self.model)

    def _on_training_start(self) -> None:
        model = self.model
        view, buffer, noise, self.scale, self.kept = watched(model, self.entry)
        # The gradients each optimiser steps with. TD3, DDPG, SAC (no `entry`): SB3 runs
        # the actor's loss through the critic after the critic's step, so the critic's
        # .grad then is not its own: read at each step, kept by reference until a change
        # after its step is seen, then copied (StepGradients), and the steps counted
        # (SB3's update is its own: its backward passes not traced). PPO, A2C, DQN: one
        # loss per step, whose gradients stay as stepped until the next update clears
        # them: read where SB3 leaves them, with no hook at its steps.
        networks = {"actor": view.actor, "critic": view.critic}
        steps: StepGradients | LeftGradients
        if self.entry is None:
            steps = StepGradients(networks, trace_backwards=False,
                                  by_reference=("actor", "critic"))
            view = dataclasses.replace(view, step_gradients=steps.gradients,
                                       step_sources=steps.sources.counts)
        else:
            steps = LeftGradients(networks)
            view = dataclasses.replace(view, step_gradients=steps.gradients)
        # A replay buffer told not to handle time limits (SB3's handle_timeout_termination,
        # off where optimize_memory_usage is on) stores every truncation as the task's end.
        self.stored_ends: dict[str, int] | None = None
        if getattr(getattr(model, "replay_buffer", None), "handle_timeout_termination",
                   True) is False:
            self.stored_ends = dict.fromkeys(ENDINGS, 0)
            view = dataclasses.replace(view, stored_dones=lambda: dict(self.stored_ends),
                                       stored_dones_fix=TIMEOUT_FIX)
        continued = self._continuation()
        start = continued.env_steps if continued is not None else model.num_timesteps
        # SB3's total_timesteps counts from its num_timesteps (0 again unless
        # reset_num_timesteps=False); the run's steps go on from `start`.
        this_call = int(self.locals["total_timesteps"]) - model.num_timesteps
        config = session_config(self.user_config, {
            **derived_config(model, self.entry, start, this_call), **self.folders})
        integration = f"{LIBRARY} {stable_baselines3.__version__} {type(model).__name__}"
        try:
            self.session = Session(config, view, buffer,
                                   int(model.observation_space.shape[0]), self._save,
                                   integration, self.eval_env, noise, start,
                                   model._n_updates, continued, SB3Keys(model).finding)
        except BaseException:
            steps.close()
            raise
        self.folders["run_name"] = self.session.paths.name  # a later learn() goes on in it
        self.watched = model  # the model whose run this is (a later learn() checks it)
        self._updates_seen = model._n_updates
        self.view = view
        self.step_gradients = steps
        # The actor-critics' steps one by one (their exploration noise is read from each
        # acting pass); the others' once per collection (sb3_rollouts.py).
        self.tap = PolicyTap(model, self.scale) if self.entry is None else None
        self.block = StepBlock() if self.entry is not None else None
        self._fresh = True
        if model.env is not None and not isinstance(model.env, EnvWatch):
            model.env = EnvWatch(model.env, self._env_failed)  # until this learn() ends

    def _unwatch_env(self) -> None:
        if isinstance(self.model.env, EnvWatch):
            self.model.env = self.model.env.venv

    def _env_failed(self, problem: str) -> None:
        """The model's envs raised: pause the run with its model and replay buffer saved
        and the reason; the exception then ends `learn()` as it would have."""
        self._unwatch_env()
        s = self.session
        if s is None or s.closed:
            return
        self._judge()
        self._tell_updates()
        s.monitor.request_pause(Finding(s.env_steps, "env_error", None, None, "pause",
                                        problem))
        self._pause()
        self._close_watchers()

    def _continuation(self) -> Continuation | None:
        """How this `learn()` continues an existing run, or None for a new run: a later
        call with this callback goes on from its run's step; a model loaded (or trained)
        before, under the name of an existing SB3 run, from the model's num_timesteps
        (from the run's own step where reset_num_timesteps restarted SB3's count)."""
        if self.session is not None:
            if not self.session.closed:  # the last learn() raised: SB3 ended it no other way
                self._judge()  # the steps it took before (no update since: SB3 collected)
                self.session.close("crashed")
            if self.model is not self.watched:  # two models' histories in one run
                raise UserError(f"this RltrainCallback watched another model's run "
                                f"'{self.session.paths.name}'; give this model a callback "
                                "of its own (RltrainCallback(run_name=...)), or load that "
                                "run's model to continue it")
            return self.session.continuation("another learn() call with its callback")
        name, model = self.folders["run_name"], self.model
        if name is None:
            return None
        paths = RunPaths(name, Path(self.folders["log_dir"]) / name,
                         Path(self.folders["checkpoint_dir"]) / name)
        status = read_status(paths.status_file)
        if status is None:
            return None  # a new run (or folders left by a start that failed)
        algo = type(model).__name__
        how = (f"to continue it, load its model ({algo}.load(PATH, env=env)) and learn "
               f"with reset_num_timesteps=False")
        check_continuable(paths, LIBRARY, how)
        if model.num_timesteps == 0 and model._n_updates == 0:  # a fresh model
            raise UserError(f"run '{name}' already exists ({paths.log_dir}); {how}, or "
                            "choose another run_name")
        steps = model.num_timesteps or int(status.get("env_steps", 0))
        return from_logs(paths, steps, f"a {algo} model, learn() with its callback")

    # ------------------------------------------------------------- each step
    def _on_rollout_start(self) -> None:
        self._fresh = True

    def _on_step(self) -> bool:
        if self.block is None:
            return self._one_step()
        s, loc = self.session, self.locals
        assert s is not None
        if self._fresh:  # SB3 trained since the last step: its updates, what is due
            self._fresh = False
            self._tell_updates()
            s.step_end()
        # rewards as in _one_step; PPO adds its bootstrap to `rewards` in place later
        actions = loc["clipped_actions"] if self.family == ON_POLICY else loc["actions"]
        dones = loc["dones"]
        finite = self.block.add(self.model._last_obs, loc["new_obs"],
                                np.asarray(actions).reshape(len(dones), -1),
                                env_rewards(self.model, loc["rewards"]), loc["rewards"],
                                dones, loc["infos"])
        last = collection_ends(loc, self.family == ON_POLICY)
        if finite and s.pause is None and not self.block.full() and not last:
            return True
        self._judge(last)
        if not last and s.pause is None:  # the status; DQN: `rltrain pause` (a safe point)
            s.step_end(requests=self.family != ON_POLICY)
        if s.pause is None or not self._safe_point():
            return True
        self._pause()
        return False

    def _judge(self, last: bool = True) -> None:
        """The block's steps told to the run (sb3_rollouts.py), as `_one_step` tells
        one; `last`: SB3 may train after it (the collection's last step, or the end of
        `learn()`)."""
        rows = self.block.take() if self.block is not None else None
        if rows is None:
            return
        s = self.session
        next_obs, terminated, truncated, finite = transitions(
            rows.next_obs, rows.actions, rows.rewards, rows.dones, rows.infos)
        if self.stored_ends is not None and rows.dones.any():
            self.stored_ends["terminated"] += int(terminated.sum())
            self.stored_ends["truncated"] += int(truncated.sum())
        s.block(rows.obs, rows.actions, rows.rewards, next_obs, terminated, truncated,
                finite, s.terms.of_envs(rows.infos, len(rows.dones)), last)
        if self.kept is not None:  # as rltrain's replay buffer takes them; its readers,
            # the probes, run at updates: after the collection, as SB3 trains
            self.kept.add_rows(rows.obs, rows.actions, rows.learnt, next_obs, terminated,
                               truncated, kept=finite)

    def _one_step(self) -> bool:
        """A step of an actor-critic: told at once, its exploration noise read from the
        acting pass (PolicyTap)."""
        s = self.session
        tap = self.tap
        assert s is not None and tap is not None
        out = tap.pop()  # before any evaluation
        self._tell_updates()
        s.step_end()
        obs, loc = self.model._last_obs, self.locals  # _last_obs: before this step
        new_obs, dones, infos = loc["new_obs"], loc["dones"], loc["infos"]
        # the reward checks judge the env's rewards (VecNormalize's originals)
        rewards = env_rewards(self.model, loc["rewards"])
        # in env units (buffer_actions are SB3's [-1, 1])
        actions = np.asarray(loc["actions"]).reshape(len(dones), -1)
        if out is not None:
            s.sample(obs, lambda: tap.env_action(out))
        else:  # a step SB3 acted at random (a warm-up's)
            s.sample(obs)
        drawn = None if out is None else tap.exploration(out, loc.get("buffer_actions"),
                                                        self.model.action_noise)
        next_obs, terminated, truncated, finite = transitions(new_obs, actions, rewards,
                                                              dones, infos)
        if self.stored_ends is not None and any(dones.tolist()):
            self.stored_ends["terminated"] += int(terminated.sum())
            self.stored_ends["truncated"] += int(truncated.sum())
        s.steps(obs, actions, rewards, next_obs, terminated, truncated, finite,
                s.terms.of_envs(infos, len(dones)), *((None, None) if drawn is None else drawn))
        tap.pop()  # passes since the acting one (an evaluation's, the map's actor)
        if s.pause is None or not self._safe_point():
            return True
        self._pause()
        return False

    def _safe_point(self) -> bool:
        """Whether `learn()` may stop at this step for the pause asked: PPO and A2C, asked
        from outside (`rltrain pause`), at the first step of a rollout, the one before
        trained on (this step is in no buffer, as SB3 leaves the step a callback stops
        at); for a rule's pause at once, so that the rollout holding what it found (a
        NaN reward) is dropped, not trained on. Any other algorithm at every step."""
        if self.family != ON_POLICY or self.model.rollout_buffer.pos == 0:
            return True
        return self.session.pause.rule != "outside_request"

    def _tell_updates(self) -> None:
        """The updates SB3 made since the last call, told at once, with the losses and
        statistics SB3 logged for them (its means over the call's gradient steps) and the
        gradient norms of the latest steps."""
        done = self.model._n_updates - self._updates_seen
        if done <= 0:
            return
        self._updates_seen = self.model._n_updates
        metrics = reported(self.model, self.family, self.model.logger.name_to_value)
        metrics.update(self.step_gradients.norms())
        self.session.update(metrics, count=done)

    def _on_training_end(self) -> None:
        s = self.session
        self._unwatch_env()
        if s is not None and not s.closed:
            self._judge()  # (a collection ends at its last step: nothing is left)
            self._tell_updates()
            s.step_end()
            if s.pause is not None:  # asked for in PPO's last rollout: its end is safe
                self._pause()
            else:
                s.close("finished")
        self._close_watchers()

    def _close_watchers(self) -> None:
        if self.tap is not None:
            self.tap.close()
        self.step_gradients.close()  # the process's optimisers step unwatched again

    # ---------------------------------------------------------------- pause
    def _save(self, paths: RunPaths, kind: str, env_steps: int) -> Path:
        if kind == "best":
            path = paths.checkpoint_dir / "best_model.zip"
            self.model.save(path)
            return path
        path = paths.checkpoint_dir / f"paused_at_step_{env_steps}.zip"
        self.model.save(path)
        buffer = None
        if self.family != ON_POLICY:  # PPO's and A2C's rollouts start afresh
            buffer = path.with_name(f"paused_at_step_{env_steps}_replay_buffer.pkl")
            self.model.save_replay_buffer(buffer)
        self.paused_files = (path, buffer)
        return path

    def _pause(self) -> None:
        s = self.session
        assert s is not None and s.pause is not None
        finding = s.pause
        s.pause_run(lambda path: self.continue_with())
        s.close("paused")
        say(f"paused at step {s.env_steps} [{finding.rule}]: {finding.message}\n"
            + self.continue_with())

    def continue_with(self) -> str:
        """The files a pause wrote and the SB3 lines that continue the run from them."""
        assert self.paused_files is not None and self.session is not None
        s = self.session
        model_file, buffer_file = self.paused_files
        left = max(s.config.max_timesteps - s.env_steps, 0)
        folders = "".join(f", {key}=\"{self.folders[key]}\"" for key, default in
                          (("log_dir", "logs"), ("checkpoint_dir", "checkpoints"))
                          if self.folders[key] != default)
        # The callback's own settings too: without them the run would go on without its
        # evaluations (early stopping, the Q check) and with other rules.
        folders += f", config={self.user_config!r}" if self.user_config else ""
        folders += ", eval_env=eval_env" if self.eval_env is not None else ""
        files = f"  model: {model_file}\n"
        load = f"    model = {type(self.model).__name__}.load(\"{model_file}\", env=env)\n"
        if buffer_file is not None:
            files += f"  replay buffer: {buffer_file}\n"
            load += f"    model.load_replay_buffer(\"{buffer_file}\")\n"
        return (f"{files}  once the cause is fixed, continue the run with:\n{load}"
                f"    model.learn({left}, reset_num_timesteps=False, "
                f"callback=RltrainCallback(run_name=\"{s.paths.name}\"{folders}))")


__all__ = ["RltrainCallback", "check_model"]  # check_model: integrations/sb3_models.py
