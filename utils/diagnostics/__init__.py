"""Flow-1 diagnostics: why an agent that trains misbehaves.

"Flow-1" names the method these follow: look at the reward signal, then at which action
the policy picks where, then at how the gradient flows through the networks, and state
each finding as a hypothesis that can be checked ("if X, then Y should be observable").
`flow1.Flow1Diagnostics` is what the training loop talks to; it drives the parts:
`reward_signal`, `state_action`, `gradients`, `ddpg_checks`
(saturation, Q over-estimation, dead ReLUs), `snapshots` (behaviour videos) and
`report` (`rltrain diagnose`). `rules` names every finding and what it suggests.
"""
