"""The reward signal's rules; checks in utils/diagnostics/reward_signal.py and flow1.py."""

from __future__ import annotations

from rltrain.utils.rules import RuleSpec

SPECS = (
    RuleSpec(
        name='reward_spikes',
        section='diagnostics',
        group='Reward signal',
        fires_when='rare (>6 sigma) penalties carry more than this share of the below-mean mass',
        threshold=0.5,
        action='warn',
        hypothesis='if rare large penalties dominate the signal, then a few steps carry most of '
                   'the negative reward and the agent learns to avoid everything near them',
        check="check the reward's penalty terms and their scale (e.g. a collision penalty x1000)"),
    RuleSpec(
        name='sparse_reward',
        section='diagnostics',
        group='Reward signal',
        fires_when='rare (>6 sigma) bonuses carry more than this share of the above-mean mass '
                   '(info)',
        threshold=0.5,
        action='warn',
        hypothesis='if rare large bonuses carry the return, then most steps give no learning '
                   'signal',
        check='informational; if learning stalls, add shaping or more exploration'),
    RuleSpec(
        name='reward_scale',
        section='diagnostics',
        group='Reward signal',
        fires_when='the largest |reward| is below 10^-threshold, or the median above '
                   '10^threshold',
        threshold=3.0,
        action='warn',
        hypothesis='if rewards are orders of magnitude from 1, then critic targets and gradients '
                   'are too small or too large to learn from',
        check='rescale rewards so that typical |r| is around 0.1-10'),
    RuleSpec(
        name='constant_reward',
        section='diagnostics',
        group='Reward signal',
        fires_when="the rewards' std / |mean| over the window at most this: they do not vary",
        threshold=1e-06,
        action='warn',
        hypothesis='if the reward does not depend on the actions (a constant, a reward term '
                   'never wired in, or a sparse reward never reached yet), then it does not vary '
                   'at all',
        check="print the env's reward over a few random steps; check the reward function and "
              'whether exploration can reach the rewarded states'),
    RuleSpec(
        name='reward_drop',
        section='none',
        group='Reward signal',
        fires_when='a return falls diagnostics.trace_drop below its moving baseline (always '
                   'reported, as an info note)',
        hypothesis='if the policy or the critic broke (or the agent met something new), then the '
                   'returns fall well below their moving baseline (diagnostics.trace_drop)',
        check="read traces/grad_trace_step_<N>.json at or before that step (each layer's "
              'gradient verdict, the losses and mean Q on the newest batch) and the findings '
              'around it'),
)
