"""The health rules: early stopping, bad returns, NaN/inf, explosions, memory, bounds.

Their checks are in utils/health.py (`HealthRules`), on values the loop has anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from rltrain.utils.config_schema import POSITIVE, RuleAction, opt
from rltrain.utils.rules import RuleSpec


@dataclass(frozen=True)
class MemoryRuleConfig:
    """The `memory` rule: resident memory of the process and, on CUDA, of the GPU."""

    threshold: float | None = opt(
        None, "process resident memory limit in MiB (null: 90% of the machine's RAM)", POSITIVE)
    gpu_threshold: float | None = opt(
        None, "GPU memory limit in MiB on CUDA (null: 90% of the device's memory)", POSITIVE)
    action: RuleAction = opt("pause", "warn, pause or off")


@dataclass(frozen=True)
class StateBoundsConfig:
    """The `state_bounds` rule: per-dimension observation limits of a safe region."""

    low: tuple[float, ...] | None = opt(None, "lower bound per observation dimension (null: none)")
    high: tuple[float, ...] | None = opt(None, "upper bound per observation dimension (null: none)")
    action: RuleAction = opt("pause", "warn, pause or off")


SPECS = (
    RuleSpec(
        name='early_stopping',
        section='monitor',
        group='Health rules',
        fires_when='no new best evaluation for `patience` evaluations (threshold: patience)',
        action='pause',
        hypothesis='if learning has plateaued, then evaluations stay below the best for many in '
                   'a row',
        check='look at eval/mean_reward; raise patience, lower the learning rates, or stop',
        fixed_threshold='the top-level key patience',
        hint='--set patience=N (N larger than now) to keep training'),
    RuleSpec(
        name='catastrophic_reward',
        section='monitor',
        group='Health rules',
        fires_when='an episode return below min_reward_threshold (threshold: that key)',
        action='pause',
        hypothesis='if the agent hit a failure mode, then single episodes fall far below the '
                   'usual range',
        check="replay the episode's seed with `rltrain eval`; check min_reward_threshold",
        fixed_threshold='the top-level key min_reward_threshold',
        hint='--set min_reward_threshold=X (lower) if such returns are expected'),
    RuleSpec(
        name='non_finite',
        section='monitor',
        group='Health rules',
        fires_when='NaN/inf in an observation, reward, action, loss or Q value',
        action='pause',
        hypothesis='if NaN/inf enters observations, rewards or losses, then updates produce NaN '
                   'weights',
        check='the finding says where: in an observation or reward, assert finite values in the '
              "env's step and check its divisions; in an update's loss, Q or gradients, the "
              'critic diverged: lower the learning rates, clip gradients (grad_clip_norm), check '
              'the reward scale',
        fixed_threshold='nothing: any NaN/inf fires it',
        hint='fix the env (its NaN/inf transitions are not stored), or --set '
             'monitor.non_finite.action=warn to train on without them',
        weight_hint='--set critic_lr=1e-4 --set actor_lr=1e-4 --set grad_clip_norm=10'),
    RuleSpec(
        name='critic_loss_explosion',
        section='monitor',
        group='Health rules',
        fires_when='critic loss above the threshold',
        threshold=1000000.0,
        action='pause',
        hypothesis='if the critic diverges, then its loss grows by orders of magnitude',
        check='compare the largest |reward| (the reward_scale statistic in flow1.jsonl): if the '
              'rewards are large, scale them down; if they are small, look at the observations '
              '(an unnormalised dimension far from 1 does this from the first update: see '
              'observation_scale); else lower critic_lr, clip gradients (grad_clip_norm)',
        weight_hint='--set critic_lr=1e-4 --set grad_clip_norm=10',
        input_scaled=True),
    RuleSpec(
        name='q_explosion',
        section='monitor',
        group='Health rules',
        fires_when='|mean Q| above the threshold',
        threshold=1000000.0,
        action='pause',
        hypothesis='if the TD targets feed on themselves, then |mean Q| grows without bound',
        check='lower gamma or critic_lr; check that terminal states stop bootstrapping',
        weight_hint='--set critic_lr=1e-4 --set gamma=0.98',
        input_scaled=True),
    RuleSpec(
        name='grad_explosion',
        section='monitor',
        group='Health rules',
        fires_when='a gradient norm (before clipping) above the threshold',
        threshold=1000000.0,
        action='pause',
        hypothesis='if a gradient explodes, then its norm before clipping jumps by orders of '
                   'magnitude',
        check='clip gradients (grad_clip_norm), lower the learning rates',
        weight_hint='--set grad_clip_norm=10 --set critic_lr=1e-4',
        input_scaled=True),
    RuleSpec(
        name='memory',
        section='monitor',
        group='Health rules',
        fires_when='process (and GPU) memory limit',
        action='pause',
        config_class=MemoryRuleConfig,
        hypothesis='if memory leaks or the buffer is too big, then resident memory keeps growing',
        check="lower replay_buffer_size; watch status.json's memory over time",
        hint='a smaller replay_buffer_size or batch_size, fewer runs on the machine (or GPU), or '
             '--set monitor.memory.threshold=MiB (higher)'),
    RuleSpec(
        name='state_bounds',
        section='monitor',
        group='Health rules',
        fires_when='observation bounds',
        action='pause',
        config_class=StateBoundsConfig,
        hypothesis='if the agent leaves the safe region, then observations cross the configured '
                   'bounds',
        check="check monitor.state_bounds and the env's safety constraints",
        hint='--set monitor.state_bounds.low=[...] / .high=[...] if such states are safe'),
)
