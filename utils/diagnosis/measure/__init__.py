"""What the diagnosis engine measures: the statistics its rules judge.

One module per thing measured: the reward signal (`reward_signal`) and its terms
(`reward_terms`), the policy's state-action map (`state_action`, with `kmeans`), the
gradient flow (`gradients`), what goes into learning (`inputs`, with the action's effect
in `action_effect`), the critic (`critic`: Q over-estimation, dead ReLUs), behaviour
videos (`snapshots`) and what the diagnostics cost the run (`timing`). The hook in
watch.py drives them. Three of them, `gradients`, `inputs` and `state_action`, hand their
statistics to their rules' checks themselves (rules/gradient_rules.py, input_rules.py,
state_action_rules.py), so measure/ imports rules/; rules/ imports nothing of measure/.
"""
