"""Flow1Diagnostics: the flow-1 diagnostics as one hook (utils/hooks/hook.py), the part of
the diagnosis engine the training loop talks to: it measures (measure/) and hands the
statistics to the rules (rules/).

It observes through hooks only (a forward hook on the actor, `.grad` read after
updates, probes that restore what they touch) and never changes the agent, its
random state or the replay sampling: a run with diagnostics learns exactly what it
learns without them. Each hook method returns the findings it made; they have the
monitor's rule shape and go through the monitor (events.jsonl, console, TensorBoard);
statistics go to TensorBoard under `flow1/` and `gradients/` and to
`logs/<run>/flow1.jsonl` for `rltrain diagnose`. The hook decides when each piece of
work is due; what a heatmap writes and finds is heatmaps.py's.
"""

from __future__ import annotations

import math
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
import torch

from rltrain.agents.registry import algorithm
from rltrain.utils.config.schema import TrainConfig, evaluation_env_kwargs, training_envs
from rltrain.utils.diagnosis.heatmaps import HeatmapWriter
from rltrain.utils.diagnosis.measure import critic, reward_terms, snapshots
from rltrain.utils.diagnosis.measure.fit import FitChecks
from rltrain.utils.diagnosis.measure.gradient_noise import GradientNoise
from rltrain.utils.diagnosis.measure.gradients import DropDetector, GradientWatch
from rltrain.utils.diagnosis.measure.inputs import InputChecks
from rltrain.utils.diagnosis.measure.observability import ObservabilityChecks
from rltrain.utils.diagnosis.measure.q_values import TakenActionQ
from rltrain.utils.diagnosis.measure.reward_signal import RewardAnalyzer
from rltrain.utils.diagnosis.measure.state_action import StateActionMap
from rltrain.utils.diagnosis.measure.timing import hook_method, timed
from rltrain.utils.diagnosis.rules import critic_rules, reward_rules
from rltrain.utils.diagnosis.rules._settings import algorithm_option
from rltrain.utils.diagnosis.rules.reward_terms import RewardTerms
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Evaluation, Hook, Step, Steps, Update
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import ReplayBuffer


class Flow1Diagnostics(Hook):
    """Reward signal, state-action map, gradient flow, critic checks and snapshots. Every
    call the loop makes and the actor hook are timed: `seconds` is what they took."""

    name = "diagnostics"
    update_batches = True

    def __init__(self, config: TrainConfig, obs_dim: int, agent: AgentView,
                 buffer: ReplayBuffer, paths: RunPaths, logger: RunLogger,
                 say: Callable[[str], None], seed: int,
                 observation: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """`observation`: what the agent sees of an env's observation (with
        normalize.observations, the run's current statistics, frozen); the videos use it."""
        self.config, self.settings = config, config.diagnostics
        self.agent, self.buffer, self.paths, self.logger = agent, buffer, paths, logger
        self.say = say
        self.pending: list[Finding] = []  # made during the hook method being called
        low, high = agent.action_low, agent.action_high
        context = RuleContext(config, obs_dim, len(low), agent)
        self.reward_rules = [cls(context) for cls in reward_rules.CHECKS]
        self.critic_checks = {cls.spec.name: cls(context) for cls in critic_rules.CHECKS}
        self.reward = RewardAnalyzer(self.settings.window_size, training_envs(config),
                                     warmup=config.learning_starts)
        self.terms = reward_terms.TermWindow(self.settings.window_size)
        self.terms_rule = RewardTerms(context)
        self.map = StateActionMap(obs_dim, low, high, self.settings, config.gamma, seed,
                                  training_envs(config), agent.discrete_actions)
        self.collecting_before_eval = self.map.collecting  # see on_eval_start
        self.heatmaps = HeatmapWriter(context, self.map, paths.log_dir / "heatmaps", logger,
                                      low, high, self.critic_checks["action_saturation"],
                                      self._report)
        self.runners = config.num_workers > 0  # the envs step in Ray env runners
        self.gradients = GradientWatch(context, buffer, logger, paths, self._report)
        self.inputs = InputChecks(context, buffer, logger, self._report)
        self.fit = FitChecks(context, buffer, logger, self._report, seed + 1)
        self.noise = GradientNoise(context, buffer, logger, self._report)
        self.observability = ObservabilityChecks(context, buffer, logger, self._report,
                                                 seed + 2)
        self.q_values = TakenActionQ(context, buffer, logger, self._report)
        self.entropy_bonus = critic.EntropyBonus(config.gamma, target_pace(config))
        # The critic learnt the training env's returns: against another env's
        # (eval_env_kwargs: another reward weight or time limit), Q is not judged.
        self.judges_q = evaluation_env_kwargs(config) == config.env_kwargs
        self.episode_drop = DropDetector(self.settings.trace_drop)
        self.eval_drop = DropDetector(self.settings.trace_drop)
        self.recent_returns: deque[float] = deque(maxlen=5)
        self.actor_pre_clip: float | None = None
        self.seconds, self.timing = 0.0, False
        self.step_end_every = math.gcd(self.settings.heatmap_freq,
                                       self.settings.snapshot_freq or 0)
        self._hook = None
        self.attach()
        self.videos = snapshots.BehaviourVideos(config, paths.log_dir / "videos", say, logger)
        self.observation = observation or (lambda obs: obs)

    def attach(self) -> None:
        """Start sampling the actor's forward passes (done at construction; again after
        `close()`, as benchmarks/throughput.py does to compare on and off in one process).
        Attaching twice still samples each forward pass once."""
        if self._hook is not None:
            self._hook.remove()
        self._hook = self.agent.actor.register_forward_hook(self._sample)

    def close(self) -> None:
        """Stop sampling the actor's forward passes; a run too short for a scheduled
        heatmap gets one at its end."""
        self._hook.remove()
        if not self.heatmaps.folder.exists() and self.map.ready():
            self.heatmaps.write(self.map.env_steps)

    # ---------------------------------------------------------------- findings
    def _report(self, found: list[Finding]) -> None:
        self.pending += found

    def record_rule(self, rule: str, env_steps: int, stats: dict[str, Any]) -> None:
        """A rule's own statistic (a rule that is its own hook), for `rltrain diagnose`
        and calibration: flow1.jsonl's "rule" lines."""
        self.logger.diagnostic("rule", env_steps, rule=rule, **stats)

    # ------------------------------------------------------------ loop hooks
    @timed
    def _sample(self, module: Any, inputs: tuple, output: Any) -> None:
        self.map.hook(module, inputs, output)

    @hook_method
    def on_step(self, step: Step) -> None:
        self.inputs.on_step(step)
        if step.stored:  # what went into the replay buffer
            self._stored(step.env_steps, step.env, step.reward, step.obs)

    @hook_method
    def on_steps(self, steps: Steps) -> None:
        self.inputs.on_steps(steps)
        first, rewards, stored, envs = (steps.first, steps.reward.tolist(),
                                        steps.stored.tolist(), steps.envs)
        if len(rewards) > envs and all(stored) and not self.runners:
            # several vector steps, all stored: each env's rows at once
            self.reward.add_rows(rewards, envs)
            self.map.on_rows(steps.env_steps, envs, len(rewards) // envs)
            return
        for row, kept in enumerate(stored):
            if kept:  # what went into the replay buffer
                self._stored(first + row, row % envs, rewards[row], steps.obs[row])

    def _stored(self, env_steps: int, env: int, reward: float, obs: np.ndarray) -> None:
        """A step that went into the replay buffer."""
        self.reward.add(reward, env)
        if self.runners:  # the actor acted in the runners: the map samples it here
            self.sample_env(env, obs, env_steps - 1)
        self.map.on_step(env_steps, env)

    def sample_env(self, env: int, obs: np.ndarray, env_steps: int) -> None:
        """One training env's state and the policy's deterministic action there, where
        the envs step outside this process (rltrain's env runners, RLlib's), so the actor's
        hook sees no acting call: its row kept at the map's rate, the actor called only
        for a kept row. `env_steps`: the steps before this one (none in the warm-up,
        whose actions are random, as where the actor acts here)."""
        if (not self.map.collecting or env_steps < self.config.learning_starts
                or not self.map.chosen(1)):
            return
        state = np.array(obs, np.float32)  # a copy: Ray's arrays arrive read-only
        with torch.no_grad():  # not inference mode: the map's actor hook skips it
            acted = self.agent.actor(torch.as_tensor(state[None], device=self.agent.device))
        self.map.keep_row(env, state, acted[0].cpu().numpy())

    @hook_method
    def on_episode_end(self, episode: EpisodeEnd) -> None:
        env_steps, env = episode.env_steps, episode.env
        self.inputs.on_episode_end(env_steps, episode.length, episode.terminated)
        rewards = self.reward.end_episode(env, episode.terminated)
        self.map.end_episode(rewards.astype(np.float64), env)
        stats = self.reward.due_stats()
        if stats is not None:
            self.logger.scalars(env_steps, {f"flow1/reward_{k}": v for k, v in stats.items()})
            self.logger.diagnostic("reward", env_steps, **stats)
            for rule in self.reward_rules:
                self.pending += rule.check(env_steps, stats, len(self.reward.episodes))
        self._reward_terms(episode)
        self.recent_returns.append(episode.episode_return)
        if len(self.recent_returns) == self.recent_returns.maxlen:
            baseline = self.episode_drop.update(float(np.mean(self.recent_returns)))
            if baseline is not None:
                self._trace(env_steps, f"episode returns fell below their baseline "
                                       f"{baseline:.1f}")

    def _reward_terms(self, episode: EpisodeEnd) -> None:
        """The reward's terms (an env that reports none: counted, nothing else)."""
        begun = episode.env_steps - episode.length  # a warm-up's random actions: not played
        if not self.terms.add(episode.reward_terms, episode.episode_return,
                              played=begun >= self.config.learning_starts):
            return
        stats = self.terms.stats()
        if stats is None:
            return
        self.logger.scalars(episode.env_steps, reward_terms.scalars(stats))
        self.logger.diagnostic("reward_terms", episode.env_steps, terms=stats,
                               episodes=len(self.terms.terms),
                               drive=self.terms_rule.driving(stats))
        self.pending += self.terms_rule.check(episode.env_steps, stats, len(self.terms.terms))

    @hook_method
    def on_update(self, update: Update) -> None:
        """An update, or each of several told at once, in turn (`update_batches`)."""
        metrics, env_steps = update.metrics, update.env_steps
        if "actor_grad_norm" in metrics:
            self.actor_pre_clip = metrics["actor_grad_norm"]
        grad_freq = self.settings.grad_freq
        # The measurements' forward passes are not the policy's: no sampling, once for
        # the batch (the fit's, the noise's, the Q values'; the gradients' saturation
        # check, under no_grad on a batch, which the map's hook skips anyway).
        with self.paused_collection():
            for updates in range(update.first, update.updates + 1):
                self.inputs.after_update(env_steps, updates)
                self.entropy_bonus.update(updates, metrics)
                self.fit.after_update(env_steps, updates)
                self.noise.after_update(env_steps, updates)
                self.q_values.after_update(env_steps, updates)
                self.observability.after_update(env_steps, updates)
                if updates % grad_freq == 0:
                    self.gradients.record(env_steps, self.actor_pre_clip,
                                          metrics.get("critic_grad_norm"), self.reward.max_abs)

    @hook_method
    def on_step_end(self, env_steps: int) -> None:
        s = self.settings
        if env_steps % s.heatmap_freq == 0 and self.map.ready():
            with self.paused_collection():
                self.heatmaps.write(env_steps)
        if s.snapshot_freq is not None and env_steps % s.snapshot_freq == 0:
            self.snapshot(env_steps, "step")

    @contextmanager
    def paused_collection(self) -> Iterator[None]:
        """No (state, action) sampling inside: evaluation and the diagnostics' own work."""
        previous, self.map.collecting = self.map.collecting, False
        try:
            yield
        finally:
            self.map.collecting = previous

    def on_eval_start(self, env_steps: int) -> list[Finding]:
        """No (state, action) sampling from the evaluation's episodes (until `on_eval`)."""
        self.collecting_before_eval, self.map.collecting = self.map.collecting, False
        return []

    @hook_method
    def on_eval(self, evaluation: Evaluation) -> None:
        env_steps, result = evaluation.env_steps, evaluation.result
        self.map.collecting = self.collecting_before_eval
        if self._judges_critic():
            self._critic_checks(env_steps, result)
        baseline = self.eval_drop.update(result.mean)
        if baseline is not None:
            self._trace(env_steps, f"eval return {result.mean:.1f} fell below its baseline "
                                   f"{baseline:.1f}")

    def _judges_critic(self) -> bool:
        """Whether the critic checks judge this run's algorithm: not one without Q critics
        of a Box actor's actions (DQN, PPO: `RuleSpec.algorithms`), whose networks they
        could not read."""
        return any(self.critic_checks[name].spec.judges(self.config.algo)
                   for name in ("q_overestimation", "dead_relu"))

    def _critic_checks(self, env_steps: int, result: Any) -> None:
        with self.paused_collection():
            q = critic.q_overestimation(self.agent, result, self.config.gamma,
                                        self.reward.max_abs, self.entropy_bonus.held)
            dead = critic.dead_relu(self.agent, self.buffer.newest(
                self.config.batch_size)) if len(self.buffer) else {}
        self.logger.scalars(env_steps, {f"flow1/{k}": v for k, v in q.items()})
        self.logger.scalars(env_steps, {f"flow1/dead_relu/{k}": v for k, v in dead.items()})
        # Kind "ddpg", from before these checks were named for the critic of every
        # algorithm: flow1.jsonl's kinds are a file format that run folders keep.
        self.logger.diagnostic("ddpg", env_steps, **q, dead_relu=dead)
        checks = self.critic_checks
        if self.judges_q:
            self.pending += checks["q_overestimation"].check(env_steps, q,
                                                             self.agent.updates())
        self.pending += checks["dead_relu"].check(env_steps, dead)

    def _trace(self, env_steps: int, reason: str) -> None:
        """A return drop: recorded (`rltrain diagnose` lists it), then traced unless a
        trace was written within the last heatmap_freq steps."""
        self.logger.diagnostic("reward_drop", env_steps, reason=reason)
        with self.paused_collection():
            self.gradients.trace(env_steps, reason, cooldown=self.settings.heatmap_freq,
                                 max_abs_reward=self.reward.max_abs)

    @hook_method
    def on_pause(self, env_steps: int) -> None:
        if self.settings.snapshot_freq is not None:
            self.snapshot(env_steps, "paused")

    # ------------------------------------------------------------- snapshots
    def snapshot(self, env_steps: int, label: str) -> None:
        with self.paused_collection():
            self.videos.record(lambda obs: self.agent.act(self.observation(obs)), env_steps,
                               label)

    def unjudged(self) -> dict[str, str]:
        """The diagnostics' rules that could not judge the run so far, and why."""
        found = {**self.inputs.unjudged(), **self.fit.unjudged(), **self.noise.unjudged(),
                 **self.observability.unjudged(), **self.q_values.unjudged()}
        why = self.terms_rule.waiting_for(len(self.terms.terms), self.terms.without)
        if why is not None:
            found[self.terms_rule.spec.name] = why
        return found

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"reward": self.reward.state_dict(), "map": self.map.state_dict(),
                "gradients": self.gradients.state_dict(),
                "episode_baseline": self.episode_drop.baseline,
                "eval_baseline": self.eval_drop.baseline,
                "recent_returns": list(self.recent_returns),
                "actor_pre_clip": self.actor_pre_clip, "inputs": self.inputs.state_dict(),
                "reward_terms": self.terms.state_dict(), "fit": self.fit.state_dict(),
                "gradient_noise": self.noise.state_dict(),
                "observability": self.observability.state_dict(),
                "q_values": self.q_values.state_dict(),
                "entropy_bonus": self.entropy_bonus.state_dict(),
                "q_overestimation": self.critic_checks["q_overestimation"].state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reward.load_state_dict(state["reward"])
        self.map.load_state_dict(state["map"])
        self.gradients.load_state_dict(state["gradients"])
        self.episode_drop.baseline = state["episode_baseline"]
        self.eval_drop.baseline = state["eval_baseline"]
        self.recent_returns.extend(state["recent_returns"])
        self.actor_pre_clip = state["actor_pre_clip"]
        if "inputs" in state:  # saved before these checks existed: they start afresh
            self.inputs.load_state_dict(state["inputs"])
        if "reward_terms" in state:  # saved before reward terms: they start afresh
            self.terms.load_state_dict(state["reward_terms"])
        if "fit" in state:  # saved before the fit checks: they start afresh
            self.fit.load_state_dict(state["fit"])
        if "gradient_noise" in state:  # saved before it was measured: it starts afresh
            self.noise.load_state_dict(state["gradient_noise"])
        if "observability" in state:  # saved before it was measured: it starts afresh
            self.observability.load_state_dict(state["observability"])
        if "q_values" in state:  # saved before Q values were measured: they start afresh
            self.q_values.load_state_dict(state["q_values"])
        if "entropy_bonus" in state:  # saved before it was kept: it starts at 0
            self.entropy_bonus.load_state_dict(state["entropy_bonus"])
        if "q_overestimation" in state:  # saved before it counted evaluations
            self.critic_checks["q_overestimation"].load_state_dict(state["q_overestimation"])


def target_pace(config: TrainConfig) -> float:
    """The share of the way the critic's target moves per update: `tau` over the
    algorithm's target_update_interval; 1 for an algorithm without target networks."""
    if not algorithm(config.algo).targets:
        return 1.0
    return config.tau / (algorithm_option(config, "target_update_interval") or 1)


class NoDiagnostics(Hook):
    """Stands in when `diagnostics.enabled` is false: a hook that does nothing."""

    name = "diagnostics"
    seconds = 0.0

    @contextmanager
    def paused_collection(self) -> Iterator[None]:
        yield

    def unjudged(self) -> dict[str, str]:
        return {}
