"""Actions: an env that does not apply them, or takes them in other units."""

from __future__ import annotations

from benchmarks.faults.case_types import Case

CASES = (
    Case("ignored_action", "none found yet (an env whose action is never applied)", "action",
         "pendulum_ddpg", ("ignored_action",), env_fault={"fault": "ignored_action"}),
    # ignored_action's hypothesis names "an action scaled to nothing": a tenth of the
    # declared torque moves Pendulum too little for its test to tell from chance.
    Case("action_units_too_small", "none found yet (an env in other action units than its "
         "declared bounds)", "action", "pendulum_ddpg", ("action_saturation", "ignored_action"),
         env_fault={"fault": "small_action_units", "factor": 0.1}),
    Case("ignored_action_lunarlander_sac",
         "related: Farama-Foundation/ViZDoom#574 (a wrapper mis-mapped the "
         "actions: the chosen action was not applied)", "action", "lunarlander_sac",
         ("ignored_action",), env_fault={"fault": "ignored_action"}),
    Case("ignored_action_halfcheetah_td3",
         "related: Farama-Foundation/ViZDoom#574 (the env applied another "
         "action than the policy's); google-deepmind/dm_control#411 "
         "(Hopper's reward 0 whatever the action)", "action", "halfcheetah_td3",
         ("ignored_action",), env_fault={"fault": "ignored_action"}),
    Case("action_units_too_small_invertedpendulum_td3",
         "related: gauthamvasan/avg#3 (a [-1, 1] policy never rescaled to "
         "Humanoid's bounds); hill-a/stable-baselines#573 (actions not "
         "rescaled)", "action",
         "invertedpendulum_td3", ("action_saturation", "ignored_action"),
         env_fault={"fault": "small_action_units", "factor": 0.02}),
)
