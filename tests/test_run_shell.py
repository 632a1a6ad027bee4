"""One run shell (utils/run/shell.py): rltrain's loop and a watched loop build the same
hooks in the same order, count episodes with the same accounting and write the same
status.json keys."""

from __future__ import annotations

import json
import math

import numpy as np
from gymnasium import spaces

from rltrain.integrations import Watcher
from rltrain.networks.actor import Actor
from rltrain.networks.critic import Critic
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.hooks.hook import Step
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.shell import Counters, EpisodeTally, count_step, next_episode_index

from conftest import DEVICE, tiny_config

LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)


def watcher(tmp_path, **config) -> Watcher:
    return Watcher(Actor(3, LOW, HIGH), Critic(3, LOW, HIGH), spaces.Box(-8, 8, (3,)),
                   spaces.Box(LOW, HIGH), run_name="watched", log_dir=str(tmp_path / "logs"),
                   checkpoint_dir=str(tmp_path / "ck"),
                   config={"env_name": "Pendulum-v1", "max_timesteps": 300,
                           "learning_starts": 100, **config})


def kinds(hooks: list) -> list[str]:
    return [type(h).__name__ for h in hooks]


def test_the_loop_and_a_watched_loop_build_the_same_hooks_in_order(tmp_path):
    config = tiny_config(tmp_path, run_name="own")
    trainer = Trainer(config, DEVICE, interactive=False)
    trainer.run(create_run(config))
    watched = watcher(tmp_path)
    try:
        ours, theirs = kinds(trainer.hooks.hooks), kinds(watched.session.hooks.hooks)
    finally:
        watched.close()
    assert ours[:len(theirs)] == theirs  # the shell's, then the driver's own
    assert ours[len(theirs):] == ["ProgressHook"]
    assert theirs[0] == "RunMetrics" and "Flow1Diagnostics" in theirs


def test_both_write_the_same_status_keys(tmp_path):
    config = tiny_config(tmp_path, run_name="own")
    Trainer(config, DEVICE, interactive=False).run(create_run(config))
    watched = watcher(tmp_path)
    watched.close()
    own = json.loads((tmp_path / "logs" / "own" / "status.json").read_text())
    other = json.loads((tmp_path / "logs" / "watched" / "status.json").read_text())
    assert set(other) - set(own) == {"integration"} and set(own) <= set(other)


def test_the_episode_accounting_leaves_nan_rewards_out_and_counts_them():
    counters, episode = Counters(), EpisodeTally(0)
    rewards = [1.0, math.nan, 2.0]
    ends = []
    for i, reward in enumerate(rewards):
        counters.env_steps += 1
        step = Step(i + 1, 0, np.zeros(3), np.zeros(1), reward, np.zeros(3), False,
                    i == len(rewards) - 1, True)
        ends.append(count_step(counters, episode, step, ended=step.truncated))
    assert ends[:2] == [None, None]
    end = ends[2]
    assert (end.episode_return, end.length, end.non_finite_rewards) == (3.0, 3, 1)
    assert (counters.episodes, counters.last_return, counters.last_non_finite_rewards) == (
        1, 3.0, 1)
    assert next_episode_index(counters, num_envs=2) == 2  # episodes 0 and 1 were running


def test_a_watched_loop_counts_its_episodes_with_the_shell(tmp_path):
    watched = watcher(tmp_path, num_envs=1)
    try:
        obs = np.zeros(3, np.float32)
        for i in range(5):
            reward = math.nan if i == 1 else -1.0
            watched.after_env_step(obs, np.zeros(1, np.float32), reward, obs,
                                   terminated=False, truncated=i == 4)
        status = watched.session.status()
    finally:
        watched.close()
    assert status["episodes"] == 1 and status["latest_episode_return"] == -4.0
    assert status["latest_episode_non_finite_rewards"] == 1
    episodes = [json.loads(line) for line in
                (tmp_path / "logs" / "watched" / "metrics.jsonl").read_text().splitlines()
                if '"kind": "episode"' in line]
    assert episodes[0]["non_finite_rewards"] == 1 and episodes[0]["length"] == 5
