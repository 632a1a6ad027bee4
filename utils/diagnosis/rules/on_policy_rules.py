"""Rules on what PPO and A2C report of each rollout's training (the ON_POLICY family,
watched in Stable-Baselines3): `policy_entropy_collapse`, `policy_step_size` and
`value_fit`. Each is its own hook and reads the update metrics the SB3 callback takes
from SB3's logger (integrations/sb3_models.py: `LOSSES`): one report per rollout,
handed on with each of its updates, judged once.

- `policy_entropy_collapse`: the policy's entropy (minus SB3's `entropy_loss`) has
  collapsed (a categorical policy: under `threshold` of the uniform policy's ln n; a
  Gaussian one: more than `gaussian_drop` nats per action dimension under its first
  rollout's), while the return has stopped rising (no new best of the mean of the last
  `episodes` episodes for `stall_steps` env steps) below what the run's own episodes
  showed reachable (under half the way from its first episodes to its best one). A
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
- `value_fit`: the share of the returns' variance the value function leaves
  unexplained (1 - SB3's explained variance, Var(returns - V) / Var(returns), on each
  rollout) at or above `threshold` (1: V explains nothing), as the median of the reports
  of the newest `window_steps` env steps, once `warmup_steps` have passed, while the
  median value loss of those reports is at least `loss_kept` of the largest reported: V
  does not predict the returns it is fit to and is not getting closer, so the advantages
  are the returns' noise. (RL Zoo's LunarLander PPO explains about 0 of its returns'
  variance for its first 100k steps, its returns hinging on crashes V cannot foresee
  yet, while its value loss falls from 5,200 to 330 and its return rises.)
  Returns far larger than a network's output reaches in a few thousand Adam steps (the
  reward's scale over 1 - gamma above `large_value`) want normalised rewards; a
  learning rate far under the usual a higher one; a vf_coef far under SB3's 0.5 a
  larger one. Rollouts of fewer than `MIN_ROLLOUT_STEPS` steps per env (A2C's 5) are
  not judged: their returns are mostly the bootstrapped V of the rollout's last state,
  so their variance, and the explained variance, says little of V's fit (a healthy
  A2C CartPole run on RL Zoo's settings measures 0.0-0.3). Nor are rollouts whose
  returns hardly vary (their std, from the value loss and the explained variance as
  sqrt(value_loss / (1 - EV)), under `min_spread` of the returns' scale): a CartPole
  policy that balances to the time limit sees returns of about 1 / (1 - gamma)
  everywhere, and its explained variance swings around 0 while V fits them to 0.01;
  a window is judged only where at least half of its rollouts are.

The settings these rules name are SB3's own (`config.library`, as SB3's constructor
names them), and so are the keys of their `suggested_set`.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from rltrain.agents.registry import ON_POLICY
from rltrain.utils.config.fields import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE
from rltrain.utils.diagnosis.rules.spec import Option, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Update

MAX_EPOCHS = 30  # more epochs per rollout than RL Zoo's tuned PPO settings ever use (20)
USUAL_EPOCHS = 10  # SB3's default
MAX_CLIP = 0.4  # a clip range above this hardly clips (RL Zoo: 0.1-0.4; SB3's 0.2)
USUAL_CLIP = 0.2
LR_FACTOR = 0.3  # the learning rate proposed for too large steps, relative to today's
MIN_LR = 1e-5  # a rate under this is far under the usual Adam rates (3e-4..1e-3)
USUAL_LR = 3e-4  # SB3's PPO default
MIN_VF_COEF = 0.05  # far under SB3's 0.5
USUAL_VF_COEF = 0.5
USUAL_ENT_COEF = 0.01  # the entropy bonus proposed (RL Zoo's LunarLander and Atari PPO)
DEFAULT_LRS = {"PPO": 3e-4, "A2C": 7e-4}  # SB3's defaults
FAR_LR = 10.0  # a learning rate this many times the default or more is far above it
MIN_ROLLOUT_STEPS = 16  # shorter rollouts per env leave the explained variance no meaning

SPECS = (
    RuleSpec(
        name="policy_entropy_collapse", section="diagnostics", threshold=0.1,
        algorithms=(ON_POLICY,),
        fires_when="a categorical policy's entropy is under this share of the uniform "
                   "policy's (a Gaussian's: `gaussian_drop` nats per action dimension under "
                   "its first rollout's) while the return has made no new best for "
                   "`stall_steps` env steps, under half the way to the run's best episode",
        hypothesis="if the policy turns near-deterministic before it has found what its "
                   "best episodes found (no entropy bonus, or steps large enough to jump "
                   "to a deterministic policy), then its entropy collapses and the return "
                   "levels off below what the run has shown reachable",
        check="add an entropy bonus (ent_coef 0.01) or lower the learning_rate; look at "
              "policy_step_size, which sets off such a collapse",
        options=(Option("gaussian_drop", 2.0, "a Gaussian policy's entropy this many nats "
                        "per action dimension under its first rollout's counts as "
                        "collapsed (its std e^2 = 7.4 times smaller)", POSITIVE),
                 Option("stall_steps", 10_000, "env steps without a new best of the mean "
                        "return of the last `episodes` episodes", AT_LEAST_ONE),
                 Option("episodes", 20, "episodes whose mean return is the return's level",
                        AT_LEAST_ONE))),
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
    RuleSpec(
        name="value_fit", section="diagnostics", threshold=0.9,
        algorithms=(ON_POLICY,),
        fires_when="the median share of the returns' variance the value function leaves "
                   "unexplained (1 - explained variance) over the newest `window_steps` env "
                   "steps is at or above this, once `warmup_steps` have passed (rollouts of "
                   "16 steps per env or more), and the value loss has not fallen under "
                   "`loss_kept` of its largest",
        hypothesis="if the value function cannot learn the returns (rewards too large for "
                   "its outputs to reach, a learning rate or vf_coef that barely moves it), "
                   "then it explains none of their variance and the advantages are noise",
        check="normalise the reward (VecNormalize(env, norm_reward=True); RL Zoo's "
              "normalize: true) where the returns are large; raise a learning_rate or "
              "vf_coef far under the usual",
        options=(Option("warmup_steps", 10_000, "env steps before the value function is "
                        "judged", NON_NEGATIVE),
                 Option("window_steps", 5000, "the newest env steps whose reports' median "
                        "is judged (at least 3 reports)", AT_LEAST_ONE),
                 Option("large_value", 1000.0, "returns larger than this (the mean reward "
                        "size over 1 - gamma) want normalised rewards", POSITIVE),
                 Option("loss_kept", 0.5, "judged only while the window's median value loss "
                        "is at least this share of the largest reported (a falling loss: V "
                        "learns)", NON_NEGATIVE),
                 Option("min_spread", 0.01, "a rollout whose returns' std is under this "
                        "share of their scale (the mean reward size over 1 - gamma) is not "
                        "judged: its explained variance is noise", NON_NEGATIVE))),
)


def library_setting(config: Any, name: str, default: Any = None) -> Any:
    """One of the watched model's settings as its library names it (`config.library`);
    a schedule's value at its start."""
    value = (config.library or {}).get(name, default)
    if isinstance(value, dict) and "start" in value:
        return value["start"]
    return value


class _RolloutRule(RuleHook):
    """A rule judged once per rollout's report (the callback hands the same metrics on
    with each of a rollout's updates), with the training episodes' returns at hand."""

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


class PolicyEntropyCollapse(_RolloutRule):
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
        kept = (level - self.first_level) / reachable if reachable > 0 else 1.0
        self.record(env_steps, entropy=round(entropy, 4), stalled_steps=stalled,
                    kept_gain=round(kept, 3))
        if stalled < self.settings.stall_steps or kept >= 0.5:
            return []
        self.best_level_at = env_steps  # the next finding needs as long a stall again
        return self._finding(env_steps, entropy, level, stalled)

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
            f"env steps, under half the way from the first episodes' {self.first_level:.4g} "
            f"to the run's best episode {self.best_episode:.4g}: the policy stopped "
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


class PolicyStepSize(_RolloutRule):
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


class ValueFit(_RolloutRule):
    spec = SPECS[2]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        # (env step, explained variance, value loss; None: the rollout's returns hardly
        # vary, or no finite loss was reported)
        self.reports: deque[tuple[int, float | None, float | None]] = deque()
        self.judged_from = self.settings.warmup_steps  # after a finding: a window later
        self.reward_size: deque[float] = deque(maxlen=100)  # |return| / length per episode
        self.peak_loss = 0.0  # the largest value loss reported

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        if episode.length > 0 and math.isfinite(episode.episode_return):
            self.reward_size.append(abs(episode.episode_return) / episode.length)
        return []

    def report(self, env_steps: int, metrics: dict[str, float]) -> list[Finding]:
        explained = metrics.get("explained_variance")
        if explained is None or not math.isfinite(explained) or self.short_rollouts():
            return []
        # a rollout whose returns hardly vary is kept as None: not judged, but counted
        loss = metrics.get("critic_loss")
        flat = self.flat_returns(explained, loss)
        finite = loss is not None and math.isfinite(loss)
        self.reports.append((env_steps, None if flat else explained,
                             loss if finite else None))
        if finite:
            self.peak_loss = max(self.peak_loss, loss)
        window = self.settings.window_steps
        while len(self.reports) > 3 and self.reports[0][0] <= env_steps - window:
            self.reports.popleft()
        judged = [x for _, x, _ in self.reports if x is not None]
        # judged only where most of the window's rollouts are judgeable
        if env_steps < self.judged_from or len(judged) < max(3, len(self.reports) / 2):
            return []
        median = statistics.median(judged)
        # the value loss's median over the window against the largest reported: V learns
        # where it has fallen well below it, whatever share of the returns' variance V
        # explains yet (a lander's returns hinge on a crash V cannot foresee early on)
        losses = [x for _, _, x in self.reports if x is not None]
        kept = (statistics.median(losses) / self.peak_loss
                if losses and self.peak_loss > 0 else 1.0)
        self.record(env_steps, explained_variance=round(median, 4),
                    loss_kept=round(kept, 4))
        if 1.0 - median < self.rule.threshold or kept < self.settings.loss_kept:
            return []
        reports = len(judged)
        self.judged_from = env_steps + window  # the next finding needs a window of its own
        proposed, why = self._fix()
        return self.fire(
            env_steps, round(1.0 - median, 4),
            f"the value function explains {median:.3g} of the returns' variance (the median "
            f"of the last {reports} rollouts' explained variance, after {env_steps} env "
            f"steps): V does not learn the returns, so the advantages are their noise; "
            f"{why}", suggested_set=proposed)

    def value_scale(self) -> float:
        """The returns' scale: the mean reward size over 1 - gamma (0: no episode yet)."""
        gamma = self.context.config.gamma
        if not self.reward_size or gamma >= 1:
            return 0.0
        return statistics.mean(self.reward_size) / (1 - gamma)

    def flat_returns(self, explained: float, value_loss: float | None) -> bool:
        """Whether the rollout's returns hardly vary: their std, sqrt(value_loss / (1 -
        EV)), under `min_spread` of their scale."""
        scale = self.value_scale()
        if value_loss is None or not math.isfinite(value_loss) or scale <= 0 or explained >= 1:
            return False
        return math.sqrt(max(value_loss, 0.0) / (1 - explained)) < self.settings.min_spread * scale

    def short_rollouts(self) -> bool:
        n_steps = library_setting(self.context.config, "n_steps")
        return isinstance(n_steps, int) and n_steps < MIN_ROLLOUT_STEPS

    def unjudged(self) -> str | None:
        if self.rule.action == "off" or not self.short_rollouts():
            return None
        return (f"rollouts of {library_setting(self.context.config, 'n_steps')} steps per env "
                f"(fewer than {MIN_ROLLOUT_STEPS}): their explained variance says little of "
                "the value function's fit")

    def _fix(self) -> tuple[dict[str, Any], str]:
        config = self.context.config
        value = self.value_scale()
        if value > self.settings.large_value:
            return ({"normalize.rewards": True},
                    f"the returns reach about {value:.3g} (the mean reward's size over 1 - "
                    "gamma), far more than its outputs reach in a few thousand steps: "
                    "normalise the reward (VecNormalize(env, norm_reward=True); RL Zoo's "
                    "normalize: true)")
        lr = float(library_setting(config, "learning_rate", config.critic_lr))
        if lr < MIN_LR:
            return ({"learning_rate": USUAL_LR},
                    f"learning_rate {lr:g} is far under the usual 3e-4..1e-3: "
                    f"learning_rate {USUAL_LR:g}")
        vf_coef = library_setting(config, "vf_coef")
        if isinstance(vf_coef, (int, float)) and vf_coef < MIN_VF_COEF:
            return ({"vf_coef": USUAL_VF_COEF},
                    f"vf_coef {vf_coef:g} is far under SB3's 0.5: vf_coef {USUAL_VF_COEF}")
        return ({}, "its settings are usual: look at what the returns hold (a reward the "
                "observation cannot predict: partial_observability; rollouts short against "
                "the horizon: n_steps, gae_lambda)")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "reports": [list(r) for r in self.reports],
                "reward_size": list(self.reward_size), "judged_from": self.judged_from,
                "peak_loss": self.peak_loss}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.reports.extend((int(r[0]), None if r[1] is None else float(r[1]),
                             None if len(r) < 3 or r[2] is None else float(r[2]))
                            for r in state["reports"])  # no loss kept before
        self.reward_size.extend(float(x) for x in state["reward_size"])
        self.judged_from = int(state["judged_from"])
        self.peak_loss = float(state.get("peak_loss", 0.0))
