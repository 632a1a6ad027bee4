"""Rules on what PPO and A2C report of each rollout's training (the ON_POLICY family,
watched in Stable-Baselines3): `policy_entropy_collapse` and `policy_step_size`
(`value_fit` and `entropy_bonus` have modules of their own, on the same `RolloutRule`).
Each is its own hook and reads the update metrics the SB3 callback takes
from SB3's logger (integrations/sb3_models.py: `LOSSES`): one report per rollout,
handed on with each of its updates, judged once.

- `policy_entropy_collapse`: the policy's entropy (minus SB3's `entropy_loss`) has
  collapsed (a categorical policy: under `threshold` of the uniform policy's ln n; a
  Gaussian one: more than `gaussian_drop` nats per action dimension under its first
  rollout's), while the return has stopped rising (no new best of the mean of the last
  `episodes` episodes for `stall_steps` env steps) below what the run's own episodes
  showed reachable: not one of the last `episodes` episodes came half the way from the
  first episodes' mean return to the run's best episode (the best of them, not their
  mean: a converged policy whose returns vary with the start state, PPO's MountainCar,
  still reaches its best episodes' returns now and then). A
  policy that stops exploring before it has found what its best episodes found: an
  entropy bonus (`ent_coef`) keeps it exploring (Schulman et al., 2017; Andrychowicz
  et al., 2021, "What matters in on-policy RL", section on regularisation); where the
  learning rate is `FAR_LR` times SB3's default or more, the steps that collapsed it
  are the cause named, and SB3's default rate the change.
- `policy_step_size`: PPO's approximate KL between the rollout's policy and the
  updated one (SB3's mean over the last epoch's minibatches) above `threshold`, and the
  share of clipped ratios above `clip_fraction` (a clip range over 0.4, which hardly
  clips, leaves that share near 0: the KL alone then), as the median of the newest
  `measurements` rollouts: each update moves the policy far outside the trust region
  PPO's clipping aims at (a KL of about 0.01-0.03 per update is usual; SB3's
  `target_kl`, OpenAI Spinning Up's 0.01-0.05). The change proposed is the setting far
  from the usual (n_epochs over 30, clip_range over 0.4), else a lower learning_rate.


The settings these rules name are SB3's own (`config.library`, as SB3's constructor
names them), and so are the keys of their `suggested_set`.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from rltrain.agents.families import ON_POLICY
from rltrain.utils.config.fields import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Update

MAX_EPOCHS = 30  # more epochs per rollout than RL Zoo's tuned PPO settings ever use (20)
USUAL_EPOCHS = 10  # SB3's default
MAX_CLIP = 0.4  # a clip range above this hardly clips (RL Zoo: 0.1-0.4; SB3's 0.2)
USUAL_CLIP = 0.2
LR_FACTOR = 0.3  # the learning rate proposed for too large steps, relative to today's
USUAL_ENT_COEF = 0.01  # the entropy bonus proposed (RL Zoo's LunarLander and Atari PPO)
DEFAULT_LRS = {"PPO": 3e-4, "A2C": 7e-4}  # SB3's defaults
FAR_LR = 10.0  # a learning rate this many times the default or more is far above it

# How the return's stall is judged (policy_entropy_collapse's and entropy_bonus's)
STALL_OPTIONS = (
    Option("stall_steps", 10_000, "env steps without a new best of the mean return of the "
           "last `episodes` episodes", AT_LEAST_ONE),
    Option("episodes", 20, "episodes whose mean return is the return's level", AT_LEAST_ONE))

SPECS = (
    RuleSpec(
        name="policy_entropy_collapse", section="diagnostics", threshold=0.1,
        algorithms=(ON_POLICY,),
        fires_when="a categorical policy's entropy is under this share of the uniform "
                   "policy's (a Gaussian's: `gaussian_drop` nats per action dimension under "
                   "its first rollout's) while the return has made no new best for "
                   "`stall_steps` env steps, none of the last `episodes` episodes half the "
                   "way to the run's best episode",
        hypothesis="if the policy turns near-deterministic before it has found what its "
                   "best episodes found (no entropy bonus, or steps large enough to jump "
                   "to a deterministic policy), then its entropy collapses and the return "
                   "levels off below what the run has shown reachable",
        check="add an entropy bonus (ent_coef 0.01) or lower the learning_rate; look at "
              "policy_step_size, which sets off such a collapse",
        options=(Option("gaussian_drop", 2.0, "a Gaussian policy's entropy this many nats "
                        "per action dimension under its first rollout's counts as "
                        "collapsed (its std e^2 = 7.4 times smaller)", POSITIVE),
                 *STALL_OPTIONS)),
    RuleSpec(
        name="policy_step_size", section="diagnostics", threshold=0.15,
        algorithms=("ppo",),
        fires_when="the median of PPO's approximate KL per rollout's update over the newest "
                   "`measurements` rollouts is above this, and the median share of clipped "
                   "ratios above `clip_fraction` (unless a clip range over 0.4 hardly clips)",
        hypothesis="if each update moves the policy far from the one that collected the "
                   "rollout (a learning rate too high for the batch, many epochs on one "
                   "rollout, a clip range that hardly clips), then the approximate KL "
                   "stands far above the usual 0.01-0.03 and most ratios are clipped",
        check="lower learning_rate, n_epochs or clip_range (the finding names the one far "
              "from the usual), or set target_kl (0.02) to stop the epochs early",
        options=(Option("clip_fraction", 0.4, "the median share of clipped ratios must be "
                        "above this too", NON_NEGATIVE),
                 Option("measurements", 5, "newest rollouts whose medians are judged",
                        AT_LEAST_ONE))),
)


def library_setting(config: Any, name: str, default: Any = None) -> Any:
    """One of the watched model's settings as its library names it (`config.library`);
    a schedule's value at its start."""
    value = (config.library or {}).get(name, default)
    if isinstance(value, dict) and "start" in value:
        return value["start"]
    return value


class RolloutRule(RuleHook):
    """A rule judged once per rollout's report (the callback hands the same metrics on
    for all of a rollout's updates), with the training episodes' returns at hand."""

    update_batches = True  # judged once per env step, however many updates it holds

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.reported_at = -1  # the env step of the newest report judged

    def on_update(self, update: Update) -> list[Finding]:
        if update.env_steps == self.reported_at:
            return []
        self.reported_at = update.env_steps
        return self.report(update.env_steps, update.metrics)

    def report(self, env_steps: int, metrics: dict[str, float]) -> list[Finding]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"reported_at": self.reported_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reported_at = int(state["reported_at"])


class PolicyEntropyCollapse(RolloutRule):
    spec = SPECS[0]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.first_entropy: float | None = None
        self.collapse: float | None = None  # the newest report's (share or nats dropped)
        self.recent: deque[float] = deque(maxlen=self.settings.episodes)
        self.first_level: float | None = None  # the mean of the first `episodes` returns
        self.best_level = -math.inf  # the best mean of `episodes` returns in a row
        self.best_level_at = 0  # the env step it was reached at
        self.best_episode = -math.inf

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        self.recent.append(episode.episode_return)
        self.best_episode = max(self.best_episode, episode.episode_return)
        if len(self.recent) == self.recent.maxlen:
            level = sum(self.recent) / len(self.recent)
            if self.first_level is None:
                self.first_level = level
            if level > self.best_level:
                self.best_level, self.best_level_at = level, episode.env_steps
        return []

    def report(self, env_steps: int, metrics: dict[str, float]) -> list[Finding]:
        if "entropy_loss" not in metrics:
            return []
        entropy = -metrics["entropy_loss"]
        if self.first_entropy is None:
            self.first_entropy = entropy
        collapsed = self._collapsed(entropy)
        if not collapsed or self.first_level is None:
            return []
        stalled = env_steps - self.best_level_at
        level = sum(self.recent) / len(self.recent)
        reachable = self.best_episode - self.first_level  # what its best episode gained
        kept = (self._reach() - self.first_level) / reachable if reachable > 0 else 1.0
        self.record(env_steps, entropy=round(entropy, 4), stalled_steps=stalled,
                    kept_gain=round(kept, 3))
        if stalled < self.settings.stall_steps or kept >= 0.5:
            return []
        self.best_level_at = env_steps  # the next finding needs as long a stall again
        return self._finding(env_steps, entropy, level, stalled)

    def _reach(self) -> float:
        """What the policy still reaches: its best recent episode (a deterministic policy
        whose returns vary with the start state reaches its best ones now and then)."""
        return max(self.recent)

    def _collapsed(self, entropy: float) -> bool:
        n = self.context.view.discrete_actions if self.context.view is not None else None
        if n is not None and n > 1:
            self.collapse = entropy / math.log(n)
            return self.collapse < self.rule.threshold
        dims = max(self.context.action_dim, 1)
        self.collapse = (self.first_entropy - entropy) / dims
        return self.collapse > self.settings.gaussian_drop

    def _finding(self, env_steps: int, entropy: float, level: float,
                 stalled: int) -> list[Finding]:
        n = self.context.view.discrete_actions if self.context.view is not None else None
        how = (f"{self.collapse:.0%} of the uniform policy's ln {n}" if n
               else f"{self.collapse:.2f} nats per action dimension under its first "
                    f"rollout's {self.first_entropy:.2f}")
        config = self.context.config
        ent_coef = library_setting(config, "ent_coef", 0.0)
        proposed = max(USUAL_ENT_COEF, 10 * float(ent_coef or 0.0))
        fix: dict[str, Any] = {"ent_coef": proposed}
        why = (f"an entropy bonus keeps it exploring: ent_coef {proposed:g} (today "
               f"{ent_coef})")
        # SB3's defaults, for SB3's models (an RLlib run's library names its rate `lr`)
        usual = (DEFAULT_LRS.get(library_setting(config, "algorithm"))
                 if library_setting(config, "lr") is None else None)
        lr = library_setting(config, "learning_rate")
        if usual and isinstance(lr, (int, float)) and lr >= FAR_LR * usual:
            fix = {"learning_rate": usual}
            why = (f"a learning_rate of {lr:g}, {lr / usual:.0f} times SB3's {usual:g}, takes "
                   f"steps that make the policy deterministic within a few updates: "
                   f"learning_rate {usual:g}")
        return self.fire(
            env_steps, round(self.collapse, 4),
            f"the policy's entropy is {entropy:.3g} ({how}) and the mean return of the last "
            f"{len(self.recent)} episodes, {level:.4g}, has made no new best for {stalled} "
            f"env steps, the best of them ({max(self.recent):.4g}) under half the way from "
            f"the first episodes' {self.first_level:.4g} to the run's best episode "
            f"{self.best_episode:.4g}: the policy stopped "
            f"exploring before it found what its best episodes did; {why}",
            suggested_set=fix)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "first_entropy": self.first_entropy,
                "recent": list(self.recent), "first_level": self.first_level,
                "best_level": self.best_level, "best_level_at": self.best_level_at,
                "best_episode": self.best_episode}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.first_entropy = state["first_entropy"]
        self.recent.extend(float(x) for x in state["recent"])
        self.first_level = state["first_level"]
        self.best_level, self.best_level_at = float(state["best_level"]), int(
            state["best_level_at"])
        self.best_episode = float(state["best_episode"])


class PolicyStepSize(RolloutRule):
    spec = SPECS[1]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        keep = self.settings.measurements
        self.kls: deque[float] = deque(maxlen=keep)
        self.clipped: deque[float] = deque(maxlen=keep)

    def report(self, env_steps: int, metrics: dict[str, float]) -> list[Finding]:
        if "approx_kl" not in metrics or "clip_fraction" not in metrics:
            return []
        self.kls.append(metrics["approx_kl"])
        self.clipped.append(metrics["clip_fraction"])
        if len(self.kls) < self.kls.maxlen:
            return []
        kl, clipped = statistics.median(self.kls), statistics.median(self.clipped)
        self.record(env_steps, approx_kl=round(kl, 5), clip_fraction=round(clipped, 4))
        clip = library_setting(self.context.config, "clip_range")
        # a clip range that hardly clips leaves the clipped share at about 0 however far
        # the policy moves: the KL alone says it then
        unclipped = isinstance(clip, (int, float)) and clip > MAX_CLIP
        if kl <= self.rule.threshold or (clipped <= self.settings.clip_fraction
                                         and not unclipped):
            return []
        self.kls.clear()  # the next finding needs as many rollouts again
        self.clipped.clear()
        proposed, why = self._fix()
        return self.fire(
            env_steps, round(kl, 4),
            f"PPO's approximate KL per rollout's update is {kl:.3g} and {clipped:.0%} of "
            f"the ratios are clipped (medians of the last {self.settings.measurements} "
            f"rollouts; usual: a KL of 0.01-0.03): each update moves the policy far from "
            f"the one that collected the rollout; {why}", suggested_set=proposed)

    def _fix(self) -> tuple[dict[str, Any], str]:
        config = self.context.config
        epochs = library_setting(config, "n_epochs")
        clip = library_setting(config, "clip_range")
        if isinstance(epochs, int) and epochs > MAX_EPOCHS:
            return ({"n_epochs": USUAL_EPOCHS},
                    f"n_epochs {epochs} is far above the usual 3-20: n_epochs {USUAL_EPOCHS}")
        if isinstance(clip, (int, float)) and clip > MAX_CLIP:
            return ({"clip_range": USUAL_CLIP},
                    f"clip_range {clip:g} hardly clips: clip_range {USUAL_CLIP}")
        lr = float(library_setting(config, "learning_rate", config.actor_lr))
        proposed = float(f"{lr * LR_FACTOR:.3g}")
        return ({"learning_rate": proposed},
                f"lower the learning_rate to {proposed:g} (today {lr:g}), or set "
                "target_kl 0.02")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "kls": list(self.kls), "clipped": list(self.clipped)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.kls.extend(float(x) for x in state["kls"])
        self.clipped.extend(float(x) for x in state["clipped"])
