"""The reward signal's rules: spikes, sparse bonuses, scale, constant rewards, drops.

They judge statistics that separate healthy from broken signals (see the calibration in
the docs' page on diagnosing a run):

- `reward_spikes`: `penalty_share`, the share of the below-mean deviation mass carried
  by steps more than 6 standard deviations below the mean. Light-tailed signals have
  none; a rare large penalty (a "x1000 collision penalty") carries most of it. A plain
  |z| > 3 share cannot see this: for a two-level reward it is at most 10%. The last
  step of a terminated episode is left out: a crash penalty there is the env's failure
  signal (LunarLander's -100).
- `sparse_reward`: `same_share`, the share of the steps that give the window's most
  common reward: at least SAME_SHARE (a reward paid only at the goal, or summed up at
  the episode's end) is a warning, since nearly every step says nothing about the
  actions; `reward_spikes` leaves such a reward to it. Unless the episodes' lengths
  explain at least ALIVE_R2 of the returns' variance (`length_r2`): then the common
  reward is an alive bonus, paid for every step the agent keeps its episode going
  (InvertedPendulum's +1), and the return says how long it did: a note. Otherwise `bonus_share`, the
  same as `penalty_share` for steps above the mean: rare large bonuses, a note.
- `constant_reward`: fires when `cv`, std / |mean| over the window, is (about) zero:
  rewards that never vary carry no signal about the actions. Unless some episode of the
  window ended terminated (`terminated_share` above 0): a constant reward per step then
  makes the return the episode's length, which the actions decide (CartPole's +1 until
  the pole falls, MountainCar's -1 until the goal). A negative constant with no episode
  ended yet is a note: a penalty per step is a task that pays for reaching its end
  sooner, and until an episode does (MountainCar's goal, which RL Zoo's DQN finds after
  some 30,000 steps) every return is the same. A positive constant where earlier
  episodes of the run ended terminated (`terminations`) is a note too: an alive bonus
  that every episode of the window now earns to its time limit (CartPole's +1 once PPO
  balances the pole for 500 steps), the task solved, not a signal lost. A reward that
  is 0, or a positive constant in a run none of whose episodes ever ended before its
  time limit, is the warning.
- `reward_scale`: fires when even the largest reward seen so far (`max_abs`) is orders
  of magnitude below 1 (rewards scaled by 1e-5 make the critic's targets vanish), or the
  typical non-zero one of the random warm-up (`typical_abs`: Pendulum's rewards x1e-4,
  whose largest is above the limit) is, or the typical one (`median_abs`) is far above
  it. The largest ever seen and the warm-up's, not a window's: a policy that learned to
  avoid action costs (MountainCarContinuous standing still) makes recent rewards
  legitimately tiny.

The statistics over the window of recent episodes are utils/diagnosis/measure/reward_signal.py's
(`RewardAnalyzer`); the flow-1 hook hands them, once per episode, to each rule's check
here, in `CHECKS` order. `reward_drop` is recorded by the hook itself, as a note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rltrain.utils.diagnosis.rules.spec import RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

Stats = dict[str, float]  # reward_signal.reward_stats, with the run's max_abs

SAME_SHARE = 0.95  # steps with one same reward from which it counts as sparse
# Episode lengths that explain this share of the returns' variance make one same per-step
# reward an alive bonus (the return follows the length), not a sparse one.
ALIVE_R2 = 0.8

SPECS = (
    RuleSpec(
        name='reward_spikes',
        section='diagnostics',
        group='Reward signal',
        fires_when='rare (>6 sigma) penalties carry more than this share of the below-mean mass '
                   "(not counting the last step of a terminated episode: a crash penalty)",
        threshold=0.5,
        action='warn',
        hypothesis='if rare large penalties dominate the signal, then a few steps carry most of '
                   'the negative reward and the agent learns to avoid everything near them',
        check="check the reward's penalty terms and their scale (e.g. a collision penalty x1000)"),
    RuleSpec(
        name='sparse_reward',
        section='diagnostics',
        group='Reward signal',
        fires_when=f'at least {SAME_SHARE:.0%} of the steps give one same reward (warning), or '
                   'rare (>6 sigma) bonuses carry more than this share of the above-mean mass '
                   '(info)',
        threshold=0.5,
        action='warn',
        hypothesis='if the reward is paid at a few steps only (a goal, the end of an episode), '
                   'then most steps give no learning signal and the critic learns slowly '
                   'or never',
        check='pay for progress at every step (shaping: a distance to the goal, the terms '
              'the end-of-episode reward sums), or explore more so that the paid steps are '
              'met'),
    RuleSpec(
        name='reward_scale',
        section='diagnostics',
        group='Reward signal',
        fires_when='the largest |reward|, or the median of the non-zero |rewards|, is below '
                   '10^-threshold; or the median |reward| is above 10^threshold',
        threshold=3.0,
        action='warn',
        hypothesis='if rewards are orders of magnitude from 1, then critic targets and gradients '
                   'are too small or too large to learn from',
        check='rescale rewards so that typical |r| is around 0.1-10'),
    RuleSpec(
        name='constant_reward',
        section='diagnostics',
        group='Reward signal',
        fires_when="the rewards' std / |mean| over the window at most this: they do not vary "
                   "(and no episode of the window ended terminated; a note for a penalty per "
                   "step, or for a positive constant where earlier episodes ended "
                   "terminated: an alive bonus earned to the time limit)",
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


class RewardSpikes(RuleCheck):
    spec = SPECS[0]

    def check(self, env_steps: int, stats: Stats, episodes: int) -> list[Finding]:
        if not stats["penalty_share"] > self.rule.threshold or _sparse(stats):
            return []
        return self.fire(env_steps, round(stats["penalty_share"], 4),
                         f"rare penalties beyond 6 sigma carry {stats['penalty_share']:.0%} "
                         f"of the below-mean reward mass (kurtosis {stats['kurtosis']:.0f})")


class SparseReward(RuleCheck):
    spec = SPECS[1]

    def check(self, env_steps: int, stats: Stats, episodes: int) -> list[Finding]:
        if _sparse(stats) and stats.get("length_r2", 0.0) >= ALIVE_R2:
            return self.fire(env_steps, round(stats["same_share"], 4),
                             f"{stats['same_share']:.1%} of the steps give one same reward, "
                             f"but the episodes' lengths explain {stats['length_r2']:.0%} of "
                             "the returns: a reward paid for every step the episode lasts "
                             "(an alive bonus), a dense signal", observation=True)
        if _sparse(stats):
            share = stats["same_share"]
            return self.fire(env_steps, round(share, 4),
                             f"{share:.1%} of the steps of the last {episodes} episodes give "
                             f"one same reward: only the other {1 - share:.1%} say anything "
                             "about the actions")
        if not stats["bonus_share"] > self.rule.threshold:
            return []
        return self.fire(env_steps, round(stats["bonus_share"], 4),
                         f"rare bonuses beyond 6 sigma carry {stats['bonus_share']:.0%} of "
                         "the above-mean reward mass", observation=True)


def _sparse(stats: Stats) -> bool:
    """Nearly every step gives one same reward, but not all (a constant reward is
    `constant_reward`'s)."""
    return SAME_SHARE <= stats.get("same_share", 0.0) < 1.0


class ConstantReward(RuleCheck):
    spec = SPECS[3]

    def check(self, env_steps: int, stats: Stats, episodes: int) -> list[Finding]:
        if not stats["cv"] <= self.rule.threshold or stats.get("terminated_share", 0.0) > 0:
            return []
        if stats["mean"] > 0 and stats.get("terminations", 0.0) > 0:  # an alive bonus
            return self.fire(env_steps, stats["cv"],
                             f"the rewards of the last {episodes} episodes are all "
                             f"{stats['mean']:.4g} and every one lasted to its time limit, "
                             f"where {stats['terminations']:.0f} of the run's episodes ended "
                             "sooner: a reward for every step an episode lasts (an alive "
                             "bonus), now earned at every step: the task as this reward "
                             "states it is solved", observation=True)
        if stats["mean"] < 0:  # a time penalty: a note
            return self.fire(env_steps, stats["cv"],
                             f"the rewards of the last {episodes} episodes are all "
                             f"{stats['mean']:.4g} and every one ended at its time limit: a "
                             "penalty per step (MountainCar's -1) says which actions are better "
                             "only once an episode reaches the task's end sooner; none has "
                             "yet (a goal the exploration has not found)", observation=True)
        return self.fire(env_steps, stats["cv"],
                         f"the rewards of the last {episodes} episodes do not vary (mean "
                         f"{stats['mean']:.4g}, std {stats['std']:.3g}): they say nothing "
                         "about the actions, so there is nothing to learn")


class RewardScale(RuleCheck):
    spec = SPECS[2]

    def check(self, env_steps: int, stats: Stats, episodes: int) -> list[Finding]:
        limit = 10.0 ** self.rule.threshold
        if stats["max_abs"] < 1 / limit:
            return self._fire(env_steps, stats["max_abs"],
                              f"the largest |reward| so far is {stats['max_abs']:.3g}: "
                              "rewards this small give the critic almost nothing to fit")
        if 0 < stats.get("typical_abs", 1.0) < 1 / limit:
            where = ("the warm-up's random actions earned" if stats.get("typical_from_warmup") ==
                     1.0 else "every episode so far earned at most")
            return self._fire(env_steps, stats["typical_abs"],
                              f"{where} a typical non-zero |reward| of "
                              f"{stats['typical_abs']:.3g} (the largest reward "
                              f"{stats['max_abs']:.3g}): rewards this small give the critic "
                              "almost nothing to fit")
        if stats["median_abs"] > limit:
            return self._fire(env_steps, stats["median_abs"],
                              f"the typical |reward| is {stats['median_abs']:.3g}: targets "
                              "this large make the critic's loss explode")
        return []

    def _fire(self, env_steps: int, value: float, message: str) -> list[Finding]:
        """With the fix a new run can take: rewards scaled by their running return's std
        (`normalize.rewards`, which a resume cannot change: the buffer holds old rewards)."""
        if self.context.config.normalize.rewards:
            return self.fire(env_steps, value, message)
        return self.fire(env_steps, value, f"{message}; scale the rewards in the env, or "
                         "train a new run with --set normalize.rewards=true",
                         suggested_set={"normalize.rewards": True})


# The order their findings are reported in, after each episode.
CHECKS = (RewardSpikes, SparseReward, ConstantReward, RewardScale)
