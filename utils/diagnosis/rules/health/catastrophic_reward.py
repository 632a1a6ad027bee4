"""`catastrophic_reward`: an episode return below the top-level `min_reward_threshold`.

Off while that key is null. Episodes that end during the random warm-up are not
judged: they show the env, not the policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding
    from rltrain.utils.hooks.hook import EpisodeEnd

SPECS = (RuleSpec(
    name='catastrophic_reward',
    section='monitor',
    group='Health rules',
    fires_when='an episode return below min_reward_threshold (threshold: that key)',
    action='pause',
    hypothesis='if the agent hit a failure mode, then single episodes fall far below the '
               'usual range',
    check="replay the episode's seed with `rltrain eval`; check min_reward_threshold",
    fixed_threshold='the top-level key min_reward_threshold',
    hint='--set min_reward_threshold=X (lower) if such returns are expected'),)


class CatastrophicReward(RuleHook):
    spec = SPECS[0]

    def configured(self) -> tuple[Any, str]:
        threshold = self.context.config.min_reward_threshold
        return threshold, "off" if threshold is None else self.settings.action

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        return self.check(episode.env_steps, episode.episode_return)

    def check(self, env_steps: int, episode_return: float) -> list[Finding]:
        threshold = self.rule.threshold
        if (threshold is None or episode_return >= threshold
                or env_steps <= self.context.config.learning_starts):
            return []
        return self.fire(env_steps, episode_return,
                         f"episode return {episode_return:.1f} is below the catastrophic "
                         f"threshold {threshold:g}")
