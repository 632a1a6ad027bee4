"""When a replayed run learns (utils/diagnosis/rules/replay_schedule.py): a warm-up
that eats the budget, and transitions replayed under once each, on fabricated runs of
an SB3 DQN's settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_q_learning_rules import DQN_CARTPOLE

from rltrain.utils.diagnosis.rules.replay_schedule import (
    LearningNotStarted,
    UpdateSchedule,
    budget,
)
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.hook import EpisodeEnd, Update

from conftest import tiny_config


def context(tmp_path: Path, learning_starts: int = 1000, total: int | None = 40_000,
            batch_size: int = 64, **library: Any) -> RuleContext:
    config = tiny_config(
        tmp_path, algo="dqn", gamma=0.99, learning_starts=learning_starts,
        batch_size=batch_size, max_timesteps=max(total or 50_000, learning_starts + 1),
        library={**DQN_CARTPOLE, **({"total_timesteps": total} if total else {}),
                 **library})
    return RuleContext(config, 4, 1, None)


def episode(steps: int) -> EpisodeEnd:
    return EpisodeEnd(steps, 0, 0, 20.0, 20, True, 0)


@pytest.mark.parametrize("start, fires", [(100_000, True), (30_000, True), (1000, False),
                                          (20_000, False)])  # half: RL Zoo's Pendulum TD3
def test_a_warm_up_that_takes_most_of_the_budget_is_named(tmp_path, start, fires):
    hook = LearningNotStarted(context(tmp_path, learning_starts=start))
    found = hook.on_episode_end(episode(20)) + hook.on_episode_end(episode(40))
    assert len(found) == int(fires)  # judged once
    if fires:
        assert found[0].suggested_set == {"learning_starts": 800}  # 2% of 40,000
        assert ("never learns" in found[0].message) == (start >= 40_000)


def test_the_budget_is_sb3s_total_timesteps_where_recorded(tmp_path):
    assert budget(context(tmp_path, learning_starts=100_000).config) == 40_000
    assert budget(context(tmp_path, total=None).config) == 50_000  # rltrain's own


def feed(hook: UpdateSchedule, steps: int, every: int, per: int = 1,
         start: int = 1000) -> list:
    """`steps` env steps; after `start`, `per` gradient steps every `every` env steps;
    an episode ends every 20 steps."""
    found, updates = [], 0
    for step in range(1, steps + 1):
        if step > start and (step - start) % every == 0:
            for _ in range(per):
                updates += 1
                found += hook.on_update(Update(step, updates, {}))
        if step % 20 == 0:
            found += hook.on_episode_end(episode(step))
    return found


def test_transitions_replayed_under_once_each_are_named(tmp_path):
    hook = UpdateSchedule(context(tmp_path, batch_size=128,
                                  train_freq=[2000, "step"], gradient_steps=1))
    found = feed(hook, 12_000, every=2000)
    assert len(found) == 1
    # 2 gradient steps of 128 for 5,000 transitions: 0.05 replays each
    assert found[0].env_steps == 6000 and found[0].value == pytest.approx(0.0512)
    assert found[0].suggested_set == {"train_freq": 16, "gradient_steps": 1}


def test_a_run_that_never_updates_after_its_warm_up_is_named(tmp_path):
    hook = UpdateSchedule(context(tmp_path, train_freq=[100_000, "step"]))
    found = feed(hook, 8000, every=100_000)
    assert [f.value for f in found] == [0.0]


@pytest.mark.parametrize("every, per", [(4, 1), (256, 128), (1, 1)])  # SB3, RL Zoo, rltrain
def test_usual_schedules_are_not_named(tmp_path, every, per):
    hook = UpdateSchedule(context(tmp_path))
    assert feed(hook, 12_000, every=every, per=per) == []
    # judged at 5,000 and 10,000 transitions past the warm-up: not at every update
    assert hook.judged_at == 10_000


def test_the_train_freq_proposed_counts_every_env_of_a_step(tmp_path):
    """SB3's train_freq counts steps of all the envs at once: with 16 envs and a batch of
    32, a gradient step every step of the envs (16 transitions) is the most it can
    propose with one gradient step (2 replays each), not one per 4 steps (0.5)."""
    hook = UpdateSchedule(context(tmp_path, batch_size=32, train_freq=[2000, "step"],
                                  n_envs=16))
    (found,) = feed(hook, 12_000, every=2000)
    assert found.suggested_set == {"train_freq": 1, "gradient_steps": 1}


@pytest.mark.parametrize("every, per", [(2000, 3), (256, 128), (300, 40)])
def test_a_batch_of_updates_is_judged_as_its_updates_one_by_one(tmp_path, every, per):
    """Told at once (`Update.count`, SB3's train() calls), the updates give the same
    findings and the same judgements as told one by one."""
    config = dict(batch_size=128, train_freq=[every, "step"], gradient_steps=per)
    one, batch = UpdateSchedule(context(tmp_path, **config)), UpdateSchedule(
        context(tmp_path, **config))
    found_one, found_batch, updates = feed(one, 30_000, every=every, per=per), [], 0
    for step in range(1, 30_001):
        if step > 1000 and (step - 1000) % every == 0:
            updates += per
            found_batch += batch.on_update(Update(step, updates, {}, count=per))
        if step % 20 == 0:
            found_batch += batch.on_episode_end(episode(step))
    assert [(f.env_steps, f.value, f.message) for f in found_batch] == [
        (f.env_steps, f.value, f.message) for f in found_one]
    assert batch.state_dict() == one.state_dict()
    assert UpdateSchedule.update_batches
