"""`value_fit` (PPO, A2C): does the value function learn the returns it is fit to?

It reads what SB3 reports of each rollout (the explained variance and the value loss,
through utils/diagnosis/rules/on_policy_rules.py's rollout hook): it fires on the share
of the returns' variance the value function leaves unexplained (1 - SB3's explained
variance, Var(returns - V) / Var(returns), on each rollout) at or above `threshold` (1:
V explains nothing), as the median of the reports of the newest `window_steps` env
steps, once `warmup_steps` have passed, while the median value loss of those reports is
at least `loss_kept` of the largest reported: V does not predict the returns it is fit
to and is not getting closer, so the advantages are the returns' noise. (RL Zoo's
LunarLander PPO explains about 0 of its returns' variance for its first 100k steps, its
returns hinging on crashes V cannot foresee yet, while its value loss falls from 5,200
to 330 and its return rises.) Returns far larger than a network's output reaches in a
few thousand Adam steps (the reward's scale over 1 - gamma above `large_value`) want
normalised rewards; a learning rate far under the usual a higher one; a vf_coef far
under SB3's 0.5 a larger one. Rollouts of fewer than `MIN_ROLLOUT_STEPS` steps per env
(A2C's 5) are not judged: their returns are mostly the bootstrapped V of the rollout's
last state, so their variance, and the explained variance, says little of V's fit (a
healthy A2C CartPole run on RL Zoo's settings measures 0.0-0.3). Nor are rollouts whose
returns hardly vary (their std, from the value loss and the explained variance as
sqrt(value_loss / (1 - EV)), under `min_spread` of the returns' scale): a CartPole
policy that balances to the time limit sees returns of about 1 / (1 - gamma) everywhere,
and its explained variance swings around 0 while V fits them to 0.01; a window is judged
only where at least half of its rollouts are.

Its settings and fixes are SB3's own names (`config.library`).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from rltrain.agents.families import ON_POLICY
from rltrain.utils.config.fields import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE
from rltrain.utils.diagnosis.rules.on_policy_rules import RolloutRule, library_setting
from rltrain.utils.diagnosis.rules.spec import Option, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd

MIN_LR = 1e-5  # a rate under this is far under the usual Adam rates (3e-4..1e-3)
USUAL_LR = 3e-4  # SB3's PPO default
MIN_VF_COEF = 0.05  # far under SB3's 0.5
USUAL_VF_COEF = 0.5
MIN_ROLLOUT_STEPS = 16  # shorter rollouts per env leave the explained variance no meaning

SPECS = (RuleSpec(
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
                    "judged: its explained variance is noise", NON_NEGATIVE))),)


class ValueFit(RolloutRule):
    spec = SPECS[0]

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
        return statistics.fmean(self.reward_size) / (1 - gamma)  # floats: no fractions

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
