"""The DDPG checks' rules; checks in utils/diagnostics/ddpg_checks.py and flow1.py."""

from __future__ import annotations

from rltrain.utils.rules import RuleSpec
from rltrain.utils.rules._remedies import lower

SPECS = (
    RuleSpec(
        name='action_saturation',
        section='diagnostics',
        group='DDPG checks',
        fires_when='share of policy actions within 1% of the action bounds',
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
        section='diagnostics',
        group='DDPG checks',
        fires_when='critic Q at eval start states over the discounted return obtained, relative',
        threshold=0.5,
        action='warn',
        hypothesis='if the critic over-estimates, then Q at the start states exceeds the return '
                   'the episodes actually obtain; a critic still catching up with a poor policy '
                   'does the same while its Q falls toward that return',
        check='if eval/mean_reward is not improving, the policy is the problem (see the other '
              'findings); if Q keeps rising above the return, use algo: td3, lower critic_lr or '
              'gamma',
        remedy=lambda c: {"critic_lr": lower(c.critic_lr, 0.3)}),
    RuleSpec(
        name='dead_relu',
        section='diagnostics',
        group='DDPG checks',
        fires_when="share of a layer's hidden units never active (a healthy bang-bang policy can "
                   'run on 2% of them)',
        threshold=0.99,
        action='warn',
        hypothesis='if units die, then a share of hidden units is zero for every input',
        check='lower learning rates; check input scaling',
        remedy=lambda c: {"actor_lr": lower(c.actor_lr, 0.3),
                          "critic_lr": lower(c.critic_lr, 0.3)}),
)
