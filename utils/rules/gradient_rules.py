"""The gradient flow's rules; checks in utils/diagnostics/gradients.py."""

from __future__ import annotations

from rltrain.utils.rules import RuleSpec
from rltrain.utils.rules._remedies import clip_norm

SPECS = (
    RuleSpec(
        name='vanishing_gradient',
        section='diagnostics',
        group='Gradient flow',
        fires_when="a weight's gradient norm below this share of its network's strongest one",
        threshold=0.001,
        action='warn',
        hypothesis='if the gradient does not reach a layer, then its norm is a tiny fraction of '
                   "the network's strongest layer",
        check='check input scaling, saturated activations, and detach() calls'),
    RuleSpec(
        name='exploding_gradient',
        section='diagnostics',
        group='Gradient flow',
        fires_when="a layer's gradient norm above this many times its own recent median, both "
                   'over the largest |reward| seen so far (a new reward scale is not an '
                   'explosion)',
        threshold=100.0,
        action='warn',
        hypothesis="if a layer's gradient explodes, then its norm jumps far above its own "
                   'history',
        check='clip gradients, lower the learning rate, check reward scale',
        remedy=lambda c: {"grad_clip_norm": clip_norm(c)}),
    RuleSpec(
        name='value_policy_imbalance',
        section='diagnostics',
        group='Gradient flow',
        fires_when="the critic's relative gradient (norm / weight norm) over the actor's",
        threshold=1000.0,
        action='warn',
        hypothesis="if the critic's updates dominate, then its relative gradient is many times "
                   "the actor's",
        check='lower critic_lr or raise actor_lr; for DDPG this is informational (two '
              'optimisers)'),
    RuleSpec(
        name='broken_gradient',
        section='diagnostics',
        group='Gradient flow',
        fires_when='a layer whose gradient is zero or None',
        action='warn',
        hypothesis="if nothing reaches a layer (the actor's tanh saturated at the action bounds, "
                   'every ReLU feeding it off, its input all zero, or the graph cut), then the '
                   'layer gets a gradient of exactly zero or none',
        check='if action_saturation fired too, every actor layer is cut off by the saturated '
              'tanh: find why the policy is pushed to the bounds (see that finding); else check '
              'the dead_relu finding, input scaling and bias initialisation; in custom code '
              'check requires_grad, detach() calls and in-place ops',
        fixed_threshold='nothing: any layer without gradient fires it'),
)
