"""The critic checks' rules: saturated actions, Q over-estimation, dead ReLUs. They judge
the runs of every algorithm.

Their statistics are measured by utils/diagnosis/measure/critic.py (Q, dead units) and
the state-action map (saturation); the flow-1 hook hands them to the checks here, after
each evaluation and each heatmap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.agents.families import ACTOR_Q_CRITICS
from rltrain.utils.config.fields import AT_LEAST_ONE
from rltrain.utils.diagnosis.rules._remedies import lower
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

SPECS = (
    RuleSpec(
        name='action_saturation',
        algorithms=ACTOR_Q_CRITICS,
        section='diagnostics',
        group='Critic checks',
        fires_when='share of policy actions within 1% of the action bounds (a note: '
                   'bang-bang policies are healthy too)',
        threshold=0.9,
        action='warn',
        hypothesis='if the critic keeps pushing the policy past the action bounds, then its '
                   'actions sit at the bounds and its tanh output stops passing gradient; the '
                   'push comes from a reward that rewards extremes (a wrong sign?), observations '
                   'far from unit scale, too high a learning rate, or an action range too small '
                   'for the task',
        check="check the reward's sign and terms, the observation scale (observation_scale) and "
              "the learning rates first (see the other findings), then the env's action units "
              'and bounds'),
    RuleSpec(
        name='q_overestimation',
        algorithms=ACTOR_Q_CRITICS,
        section='diagnostics',
        group='Critic checks',
        fires_when='critic Q at eval start states over the discounted return obtained (for '
                   'a soft critic, plus the entropy bonus its Q may still hold), relative',
        threshold=0.5,
        action='warn',
        hypothesis='if the critic over-estimates, then Q at the start states exceeds the return '
                   'the episodes actually obtain; a critic still catching up with a poor policy '
                   'does the same while its Q falls toward that return; a soft critic (SAC) '
                   'also holds the entropy bonus of its recent targets, which is not '
                   'over-estimation',
        check='if eval/mean_reward is not improving, the policy is the problem (see the other '
              'findings); if Q keeps rising above the return, use algo: td3, lower critic_lr or '
              'gamma',
        remedy=lambda c: {"critic_lr": lower(c.critic_lr, 0.3)},
        options=(Option("evaluations", 2, "evaluations in a row over the threshold before "
                        "the rule fires: a critic's bias stays from one to the next, one "
                        "poor evaluation is the policy's", AT_LEAST_ONE),)),
    RuleSpec(
        name='dead_relu',
        algorithms=ACTOR_Q_CRITICS,
        section='diagnostics',
        group='Critic checks',
        fires_when="share of a layer's hidden units never active on a replay batch (healthy "
                   'MountainCar runs reach 99.7%, one unit of 300, while the car stands '
                   'still, and recover)',
        threshold=0.999,
        action='warn',
        hypothesis='if units die, then a share of hidden units is zero for every input',
        check='lower learning rates; check input scaling',
        remedy=lambda c: {"actor_lr": lower(c.actor_lr, 0.3),
                          "critic_lr": lower(c.critic_lr, 0.3)}),
)


class ActionSaturation(RuleCheck):
    spec = SPECS[0]

    def check(self, env_steps: int, saturation: float | None) -> list[Finding]:
        """`saturation`: the share of sampled actions near the bounds (None: no samples)."""
        if saturation is None or not saturation > self.rule.threshold:
            return []
        # A note: policies at their bounds are also healthy bang-bang control (TD3 on
        # Hopper and HalfCheetah: 97-99% at 5,000 steps); what makes saturation a fault
        # (an actor that no longer moves, a rate or a scale far off) is other rules'.
        return self.fire(env_steps, round(saturation, 4),
                         f"{saturation:.1%} of the policy's actions are within 1% of the "
                         "action bounds (tanh saturated): bang-bang control, or the symptom "
                         "of what the other findings name", observation=True)


class QOverestimation(RuleCheck):
    spec = SPECS[1]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.over = 0  # evaluations in a row over the threshold

    def state_dict(self) -> dict[str, int]:
        return {"over": self.over}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.over = int(state["over"])

    def check(self, env_steps: int, q: dict[str, float], updates: int) -> list[Finding]:
        """`q`: measure/critic.py's q_overestimation; judged once the critic has had
        diagnostics.q_warmup_updates updates."""
        warm = updates >= self.context.config.diagnostics.q_warmup_updates
        over = warm and q["q_overestimation"] > self.rule.threshold
        self.over = self.over + 1 if over else 0
        if self.over < self.settings.evaluations:
            return []
        bonus = q.get("q_entropy_bonus", 0.0)
        held = (f", and at most {bonus:.1f} of Q is the entropy bonus its targets still hold"
                if bonus > 0 else "")
        return self.fire(env_steps, round(q["q_overestimation"], 4),
                         f"Q at the start states is {q['q_estimate']:.1f} but the episodes "
                         f"obtained {q['q_obtained']:.1f} (discounted){held}")


class DeadRelu(RuleCheck):
    spec = SPECS[2]

    def check(self, env_steps: int, dead: dict[str, float]) -> list[Finding]:
        """`dead`: the share of never-active units per hidden ReLU layer."""
        worst = max(dead.items(), key=lambda kv: kv[1], default=None)
        if not (worst and worst[1] > self.rule.threshold):
            return []
        return self.fire(env_steps, round(worst[1], 4),
                         f"{worst[1]:.1%} of layer {worst[0]}'s units are never active")


CHECKS = (ActionSaturation, QOverestimation, DeadRelu)
