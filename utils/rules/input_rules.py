"""What the env and config give the agent to learn from; checks in
utils/diagnostics/inputs.py and action_effect.py."""

from __future__ import annotations

from rltrain.utils.rules import RuleSpec

SPECS = (
    RuleSpec(
        name='observation_scale',
        section='diagnostics',
        group='What goes into learning',
        fires_when="an observation dimension's RMS over the newest 1000 transitions, over "
                   'sqrt(obs_dim), is above 10^threshold',
        threshold=2.0,
        action='warn',
        hypothesis='if an observation dimension is far from unit scale, then it drives the '
                   "networks' first layers alone, the critic's loss explodes from the first "
                   'updates and the policy saturates',
        check='divide that dimension by its typical range in the env (a fixed scale: running '
              "normalisation changes what the replay buffer's older observations mean)",
        hint='scale that dimension in the env and train a new run (the replay buffer holds the '
             'old scale), or --set diagnostics.observation_scale.action=warn'),
    RuleSpec(
        name='frozen_observation',
        section='diagnostics',
        group='What goes into learning',
        fires_when='no env step changed any observation dimension over this many newest '
                   'transitions (some dimensions: info)',
        threshold=1000.0,
        action='warn',
        hypothesis='if step() returns a stale observation (or a sensor is stuck), then the '
                   'observation (or that dimension) does not change at all while the agent acts, '
                   'and nothing can be learned from it',
        check='print the observations of a few steps with random actions; check that step() '
              'returns the new state, not a copy of the reset one; some dimensions only (info): '
              'a goal fixed within an episode, a constant by design or an event that has not '
              'happened yet is harmless, a sensor that should move is stuck',
        hint="fix the env's step() and train a new run, or --set "
             'diagnostics.frozen_observation.action=warn'),
    RuleSpec(
        name='time_limit_terminal',
        section='diagnostics',
        group='What goes into learning',
        fires_when='this many episodes in a row ended `terminated` at one same length (of at '
                   "least 50 steps): a time limit reported as the task's end?",
        threshold=20.0,
        action='warn',
        hypothesis='if a time limit is reported as `terminated` (the task ended) instead of '
                   '`truncated`, then episodes end `terminated` at one same length, and the '
                   'critic learns that nothing follows those states: it does not bootstrap there',
        check='return truncated=True at the time limit (or register the env with '
              "max_episode_steps and let Gymnasium's TimeLimit do it); if the task really ends "
              'there (the observation says the time left), or a deterministic policy fails at '
              'the same step every episode, this is no fault',
        hint='report the time limit as truncated and train a new run (the stored transitions say '
             'terminated), or --set diagnostics.time_limit_terminal.action=warn'),
    RuleSpec(
        name='short_horizon',
        section='diagnostics',
        group='What goes into learning',
        fires_when="gamma's horizon 1/(1-gamma) is below this share of the mean episode length",
        threshold=0.02,
        action='warn',
        hypothesis='if gamma is too small for the task, then the agent values only the next few '
                   'rewards (1/(1-gamma) steps) and never learns what pays off later in the '
                   'episode',
        check='raise gamma (0.99 looks about 100 steps ahead); below 1, so that Q stays bounded',
        hint='--set gamma=0.99 (or what the task needs)',
        remedy=lambda c: {"gamma": 0.99}),
    RuleSpec(
        name='small_replay',
        section='diagnostics',
        group='What goes into learning',
        fires_when='the replay buffer holds fewer than this many batches',
        threshold=10.0,
        action='warn',
        hypothesis='if the replay buffer is barely larger than a batch, then every update sees '
                   'nearly the same, newest, correlated transitions; the critic fits them and '
                   'forgets the rest',
        check='raise replay_buffer_size (1e5-1e6 is usual for off-policy continuous control)',
        hint='replay_buffer_size cannot change on resume: train a new run with a larger one, or '
             '--set diagnostics.small_replay.action=warn'),
    RuleSpec(
        name='ignored_action',
        section='diagnostics',
        group='What goes into learning',
        fires_when="the warm-up's random actions changed the observations and the reward no more "
                   "than chance: each action dimension's strongest link, in units of chance's "
                   'strongest, below this (all dimensions: warning, some: info; judged on 1000 '
                   'warm-up steps, a shorter warm-up is not judged)',
        threshold=1.5,
        action='warn',
        hypothesis='if the env does not apply the action (a wrapper that drops or overwrites it, '
                   'an action scaled to nothing, actions sent to another env), then neither the '
                   'next observations nor the rewards depend on it, and there is nothing to '
                   'learn',
        check='step the env twice from one state (reset with the same seed) with opposite '
              "actions and compare the observations; check every wrapper's step() and the "
              "action's scale; action_effect in flow1.jsonl names the strongest link found",
        hint='make the env apply the action and train a new run (the replay buffer holds what '
             'the broken env gave), or --set diagnostics.ignored_action.action=warn'),
)
