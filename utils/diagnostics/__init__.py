"""Flow-1 diagnostics (`000_1e9dadcbb0133058.txt`): why an agent that trains misbehaves.

`flow1.Flow1Diagnostics` is what the training loop talks to; it drives the parts:
`reward_signal` (section 3.1), `state_action` (3.2), `gradients` (3.3), `ddpg_checks`
(saturation, Q over-estimation, dead ReLUs), `snapshots` (behaviour videos) and
`report` (`rltrain diagnose`). `rules` names every finding and what it suggests.
"""
