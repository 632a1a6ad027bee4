"""Every rule rltrain can report, with a hypothesis and what to check.

Each hypothesis is falsifiable: "if X, then Y should be observable". `rltrain diagnose`
prints these next to each finding. The names are part of the JSON output that users
script against: never rename one.
"""

from __future__ import annotations

from rltrain.utils.rules import all_specs

# rule -> (hypothesis, suggested check)
RULES: dict[str, tuple[str, str]] = {
    # health rules of the TrainingMonitor
    "early_stopping": (
        "if learning has plateaued, then evaluations stay below the best for many in a row",
        "look at eval/mean_reward; raise patience, lower the learning rates, or stop"),
    "catastrophic_reward": (
        "if the agent hit a failure mode, then single episodes fall far below the usual range",
        "replay the episode's seed with `rltrain eval`; check min_reward_threshold"),
    "non_finite": (
        "if NaN/inf enters observations, rewards or losses, then updates produce NaN weights",
        "the finding says where: in an observation or reward, assert finite values in the env's "
        "step and check its divisions; in an update's loss, Q or "
        "gradients, the critic diverged: lower the learning rates, clip gradients "
        "(grad_clip_norm), check the reward scale"),
    "critic_loss_explosion": (
        "if the critic diverges, then its loss grows by orders of magnitude",
        "compare the largest |reward| (the reward_scale statistic in flow1.jsonl): if the "
        "rewards are large, scale them down; if they are small, look at the observations "
        "(an unnormalised dimension far from 1 does this from the first update: see "
        "observation_scale); else "
        "lower critic_lr, clip gradients (grad_clip_norm)"),
    "q_explosion": (
        "if the TD targets feed on themselves, then |mean Q| grows without bound",
        "lower gamma or critic_lr; check that terminal states stop bootstrapping"),
    "grad_explosion": (
        "if a gradient explodes, then its norm before clipping jumps by orders of magnitude",
        "clip gradients (grad_clip_norm), lower the learning rates"),
    "memory": (
        "if memory leaks or the buffer is too big, then resident memory keeps growing",
        "lower replay_buffer_size; watch status.json's memory over time"),
    "state_bounds": (
        "if the agent leaves the safe region, then observations cross the configured bounds",
        "check monitor.state_bounds and the env's safety constraints"),
    # runs stopped by something outside the training (no threshold: never off)
    "env_error": (
        "if the env's own code fails on some state or action, then its reset or step raises "
        "there, every time that state and action recur",
        "read logs/<run>/env_error_step_<N>.txt; once the env is fixed, rltrain resume "
        "takes the failed step again with the same actions"),
    "write_failure": (
        "if the disk is full or a folder is not writable, then saving logs or checkpoints "
        "fails",
        "free disk space or fix the permissions, then resume the checkpoint named"),
    # flow-1 diagnostics: reward signal, state-action map, gradient flow, DDPG checks
    "reward_spikes": (
        "if rare large penalties dominate the signal, then a few steps carry most of the "
        "negative reward and the agent learns to avoid everything near them",
        "check the reward's penalty terms and their scale (e.g. a collision penalty x1000)"),
    "sparse_reward": (
        "if rare large bonuses carry the return, then most steps give no learning signal",
        "informational; if learning stalls, add shaping or more exploration"),
    "reward_scale": (
        "if rewards are orders of magnitude from 1, then critic targets and gradients are "
        "too small or too large to learn from",
        "rescale rewards so that typical |r| is around 0.1-10"),
    "constant_reward": (
        "if the reward does not depend on the actions (a constant, a reward term never "
        "wired in, or a sparse reward never reached yet), then it does not vary at all",
        "print the env's reward over a few random steps; check the reward function and "
        "whether exploration can reach the rewarded states"),
    "blind_cluster": (
        "if the state encoding misses information, then in some state clusters no action "
        "is clearly preferred",
        "dump the cluster's typical states (heatmaps/clusters_step_*.json); check "
        "normalisation and missing features"),
    "chaotic_cluster": (
        "if the policy has not learned a region, then its actions there are near uniform",
        "check exploration noise and whether the region is reachable"),
    "fixated_cluster": (
        "if the policy settled on one action in a region (often right: a bang-bang "
        "controller does this), then that action is chosen there almost always; it is a "
        "problem only where the return there drops while it does",
        "look at the cluster's typical states and the chosen action; recompute the reward "
        "for the right action by hand"),
    "vanishing_gradient": (
        "if the gradient does not reach a layer, then its norm is a tiny fraction of the "
        "network's strongest layer",
        "check input scaling, saturated activations, and detach() calls"),
    "exploding_gradient": (
        "if a layer's gradient explodes, then its norm jumps far above its own history",
        "clip gradients, lower the learning rate, check reward scale"),
    "value_policy_imbalance": (
        "if the critic's updates dominate, then its relative gradient is many times the "
        "actor's",
        "lower critic_lr or raise actor_lr; for DDPG this is informational (two optimisers)"),
    "broken_gradient": (
        "if nothing reaches a layer (the actor's tanh saturated at the action bounds, every "
        "ReLU feeding it off, its input all zero, or the graph cut), then the layer gets a "
        "gradient of exactly zero or none",
        "if action_saturation fired too, every actor layer is cut off by the saturated tanh: "
        "find why the policy is pushed to the bounds (see that finding); else check the "
        "dead_relu finding, input scaling and bias initialisation; in custom code check "
        "requires_grad, detach() calls and in-place ops"),
    "action_saturation": (
        "if the critic keeps pushing the policy past the action bounds, then its actions "
        "sit at the bounds and its tanh output stops passing gradient; the push comes from "
        "a reward that rewards extremes (a wrong sign?), observations far from unit scale, "
        "too high a learning rate, or an action range too small for the task",
        "check the reward's sign and terms, the observation scale (observation_scale) and "
        "the learning rates first (see the other findings), then the env's action units "
        "and bounds"),
    "q_overestimation": (
        "if the critic over-estimates, then Q at the start states exceeds the return the "
        "episodes actually obtain; a critic still catching up with a poor policy does the "
        "same while its Q falls toward that return",
        "if eval/mean_reward is not improving, the policy is the problem (see the other "
        "findings); if Q keeps rising above the return, use algo: td3, lower critic_lr or "
        "gamma"),
    "reward_drop": (
        "if the policy or the critic broke (or the agent met something new), then the "
        "returns fall well below their moving baseline (diagnostics.trace_drop)",
        "read traces/grad_trace_step_<N>.json at or before that step (each layer's gradient "
        "verdict, the losses and mean Q on the newest batch) and the findings around it"),
    # what the env and config give the agent to learn from (utils/diagnostics/inputs.py)
    "observation_scale": (
        "if an observation dimension is far from unit scale, then it drives the networks' "
        "first layers alone, the critic's loss explodes from the first updates and the "
        "policy saturates",
        "divide that dimension by its typical range in the env (a fixed scale: running "
        "normalisation changes what the replay buffer's older observations mean)"),
    "frozen_observation": (
        "if step() returns a stale observation (or a sensor is stuck), then the observation "
        "(or that dimension) does not change at all while the agent acts, and nothing can "
        "be learned from it",
        "print the observations of a few steps with random actions; check that step() "
        "returns the new state, not a copy of the reset one; some dimensions only (info): "
        "a goal fixed within an episode, a constant by design or an event that has not "
        "happened yet is harmless, a sensor that should move is stuck"),
    "time_limit_terminal": (
        "if a time limit is reported as `terminated` (the task ended) instead of "
        "`truncated`, then episodes end `terminated` at one same length, and the critic "
        "learns that nothing follows those states: it does not bootstrap there",
        "return truncated=True at the time limit (or register the env with "
        "max_episode_steps and let Gymnasium's TimeLimit do it); if the task really ends "
        "there (the observation says the time left), or a deterministic policy fails at "
        "the same step every episode, this is no fault"),
    "short_horizon": (
        "if gamma is too small for the task, then the agent values only the next few "
        "rewards (1/(1-gamma) steps) and never learns what pays off later in the episode",
        "raise gamma (0.99 looks about 100 steps ahead); below 1, so that Q stays bounded"),
    "small_replay": (
        "if the replay buffer is barely larger than a batch, then every update sees nearly "
        "the same, newest, correlated transitions; the critic fits them and forgets the "
        "rest",
        "raise replay_buffer_size (1e5-1e6 is usual for off-policy continuous control)"),
    "ignored_action": (
        "if the env does not apply the action (a wrapper that drops or overwrites it, an "
        "action scaled to nothing, actions sent to another env), then neither the next "
        "observations nor the rewards depend on it, and there is nothing to learn",
        "step the env twice from one state (reset with the same seed) with opposite "
        "actions and compare the observations; check every wrapper's step() and the "
        "action's scale; action_effect in flow1.jsonl names the strongest link found"),
    "dead_relu": (
        "if units die, then a share of hidden units is zero for every input",
        "lower learning rates; check input scaling"),
}

# The rules declared in utils/rules/ (each with its own spec), after the ones above.
RULES.update({name: (spec.hypothesis, spec.check) for name, spec in all_specs().items()
              if name not in RULES})

# events.jsonl's action -> the finding's severity ("stop": stopped without a checkpoint).
SEVERITY = {"info": "info", "warn": "warning", "pause": "pause", "stop": "pause"}
