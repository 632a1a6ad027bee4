"""The explosion rules: critic loss, |mean Q| and gradient norms beyond their thresholds.

Judged on an update's metrics (or a probe of restored weights), so on the weights: the
weights saved at that step already fail them. An update with a NaN/inf metric is
`non_finite`'s alone. Large rewards or observations set these rules off too
(`input_scaled`): the finding's reading in `rltrain diagnose` says so. Where the rewards
themselves are that large (the largest |reward| so far above LARGE_REWARD), the
explosion is theirs: the finding proposes scaling them (`normalize.rewards`, for a new
run) instead of a smaller learning rate, since the explosion comes before the reward
rules judge (a Pendulum reward x1000 blows the critic's loss past 1e6 within its
first hundred updates). So does a critic loss under RETURN_SHARE of the squared largest
return the rewards allow (the largest |reward| over 1 - gamma): a critic that has not
fit returns that large yet has such a loss, where a diverging one goes far past it
(CartPole's reward x1000: a loss of 1.4e7 against returns of up to 50,000, 2.5e9
squared; a diverging Pendulum critic: 1e6 against 1,630, 2.7e6 squared).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.utils.diagnosis.rules._remedies import clip_norm, lower
from rltrain.utils.diagnosis.rules.health.non_finite import non_finite_metrics
from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import Step, Steps, Update

LARGE_REWARD = 1e3  # reward_scale's default limit for the typical |reward|
RETURN_SHARE = 0.01  # a loss under this share of the squared largest return: the returns'


SPECS = (
    RuleSpec(
        name='critic_loss_explosion',
        section='monitor',
        group='Health rules',
        fires_when='critic loss above the threshold',
        threshold=1000000.0,
        action='pause',
        hypothesis='if the critic diverges, then its loss grows by orders of magnitude',
        check='compare the largest |reward| (the reward_scale statistic in flow1.jsonl): if the '
              'rewards are large, scale them down; if they are small, look at the observations '
              '(an unnormalised dimension far from 1 does this from the first update: see '
              'observation_scale); else lower critic_lr, clip gradients (grad_clip_norm)',
        weight_hint='--set critic_lr=1e-4 --set grad_clip_norm=10',
        input_scaled=True,
        remedy=lambda c: {"critic_lr": lower(c.critic_lr, 0.1), "grad_clip_norm": clip_norm(c)}),
    RuleSpec(
        name='q_explosion',
        section='monitor',
        group='Health rules',
        fires_when='|mean Q| above the threshold',
        threshold=1000000.0,
        action='pause',
        hypothesis='if the TD targets feed on themselves, then |mean Q| grows without bound',
        check='lower gamma or critic_lr; check that terminal states stop bootstrapping',
        weight_hint='--set critic_lr=1e-4 --set gamma=0.98',
        input_scaled=True,
        remedy=lambda c: {"critic_lr": lower(c.critic_lr, 0.1)}),
    RuleSpec(
        name='grad_explosion',
        section='monitor',
        group='Health rules',
        fires_when='a gradient norm (before clipping) above the threshold',
        threshold=1000000.0,
        action='pause',
        hypothesis='if a gradient explodes, then its norm before clipping jumps by orders of '
                   'magnitude',
        check='clip gradients (grad_clip_norm), lower the learning rates',
        weight_hint='--set grad_clip_norm=10 --set critic_lr=1e-4',
        input_scaled=True,
        remedy=lambda c: {"grad_clip_norm": clip_norm(c)}),
)


class Explosion(RuleHook):
    """|metric| above the threshold, for each (metric key, its words) of `metrics`."""

    update_batches = True  # judges the metrics, which a batch's updates share

    metrics: tuple[tuple[str, str], ...] = ()
    largest_reward = 0.0  # the largest finite |reward| so far

    def on_step(self, step: Step) -> list[Finding]:
        reward = abs(step.reward)
        if reward > self.largest_reward and reward != float("inf"):
            self.largest_reward = reward
        return []

    def on_steps(self, steps: Steps) -> list[Finding]:
        if steps.largest_abs_reward > self.largest_reward:
            self.largest_reward = steps.largest_abs_reward
        return []

    def on_update(self, update: Update) -> list[Finding]:
        return self.check_update(update.env_steps, update.metrics)

    def check_update(self, env_steps: int, metrics: dict[str, float],
                     probe: bool = False) -> list[Finding]:
        """After an update (or, `probe`, the restored weights' loss, Q and gradients on a
        batch: the same words)."""
        if self.rule.action == "off":
            return []
        found, threshold = [], self.rule.threshold
        for key, label in self.metrics:
            value = metrics.get(key)
            if value is not None and abs(value) > threshold:
                if non_finite_metrics(metrics):  # only now: the usual update costs nothing
                    return []
                beyond = f"above {threshold:g}" if value > 0 else f"below {-threshold:g}"
                theirs = self._rewards_cause(key, value)
                found += self.fire(env_steps, value, f"{label} {value:.4g} is {beyond}"
                                   + self._rewards(theirs), on_weights=True,
                                   suggested_set=self._reward_fix(theirs))
        return found

    def _rewards_cause(self, key: str, value: float) -> bool:
        """Whether the rewards' scale explains the explosion: rewards above LARGE_REWARD,
        or a critic loss under RETURN_SHARE of the squared largest return they allow."""
        if self.largest_reward > LARGE_REWARD:
            return True
        gamma = self.context.config.gamma
        if key != "critic_loss" or gamma >= 1 or self.largest_reward <= 0:
            return False
        largest_return = self.largest_reward / (1 - gamma)
        return abs(value) < RETURN_SHARE * largest_return ** 2

    def _rewards(self, theirs: bool) -> str:
        if not theirs:
            return ""
        gamma = self.context.config.gamma
        returns = (f" (returns of up to {self.largest_reward / (1 - gamma):.3g})"
                   if gamma < 1 else "")
        return (f"; the largest |reward| so far is {self.largest_reward:.4g}{returns}: "
                "rewards this large blow up the critic's targets; scale them in the env, or "
                "train a new run with --set normalize.rewards=true")

    def _reward_fix(self, theirs: bool) -> dict[str, Any] | None:
        """normalize.rewards where the rewards are that large (None: the spec's remedy)."""
        if not theirs or self.context.config.normalize.rewards:
            return None
        return {"normalize.rewards": True}

    def state_dict(self) -> dict[str, Any]:
        return {"largest_reward": self.largest_reward}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.largest_reward = float(state.get("largest_reward", 0.0))


class CriticLossExplosion(Explosion):
    spec = SPECS[0]
    metrics = (("critic_loss", "critic loss"),)


class QExplosion(Explosion):
    spec = SPECS[1]
    metrics = (("q_mean", "mean Q"),)


class GradExplosion(Explosion):
    spec = SPECS[2]
    metrics = (("critic_grad_norm", "critic gradient norm"),
               ("actor_grad_norm", "actor gradient norm"))
