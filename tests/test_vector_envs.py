"""num_envs > 1: Gymnasium vector envs behind the same per-env-step loop, resumed exactly."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from test_resume import assert_fork_matches_the_full_run, assert_same_state, full_run

from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.config.loader import load_config
from rltrain.utils.diagnosis.measure.reward_signal import RewardAnalyzer
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl

from conftest import DEVICE, tiny_config


def test_every_env_step_of_every_env_is_counted_stored_and_ends_its_episode(tmp_path):
    # 3 Pendulum envs (200-step episodes), 605 env steps: each env finishes episode
    # 0, 1 or 2 after 200 of its own steps, then starts the next index (3, 4, 5).
    config = tiny_config(tmp_path, run_name="vec", num_envs=3, max_timesteps=605,
                         eval_freq=1000, checkpoint_freq=1000)
    trainer = Trainer(config, DEVICE, interactive=False)
    assert trainer.run(create_run(config)).status == "finished"
    episodes = [m for m in read_jsonl(tmp_path / "logs" / "vec" / "metrics.jsonl")
                if m["kind"] == "episode"]
    assert sorted(m["episode"] for m in episodes) == [0, 1, 2]
    assert all(m["length"] == 200 for m in episodes)
    assert [m["env_steps"] for m in episodes] == [598, 599, 600]  # env 0, 1, 2 in turn
    assert len(trainer.state.buffer) == 605 and trainer.state.counters.episodes == 3
    assert [e.index for e in trainer.state.collector.episodes] == [3, 4, 5]
    # 606 transitions came from 202 vector steps; env 2's last was not handed out.
    assert [e.length for e in trainer.state.collector.episodes] == [2, 2, 1]
    assert len(trainer.state.collector.pending) == 1
    # One update per env step once learning started: utd_ratio is per env step.
    assert trainer.state.agent.updates == 605 - config.learning_starts + 1


def test_each_env_gets_its_own_episode_seeds_and_exploration(tmp_path):
    config = tiny_config(tmp_path, run_name="seeds", num_envs=2,
                         noise_type="ou")
    trainer = Trainer(config, DEVICE, interactive=False)
    trainer.state.collector.start(0)
    first = np.stack([e.obs for e in trainer.state.collector.episodes])
    assert not np.array_equal(first[0], first[1])  # episodes 0 and 1 differ
    actions = trainer.state.exploration.noisy(np.zeros((2, 1), np.float32), 5000)
    assert actions.shape == (2, 1) and actions[0, 0] != actions[1, 0]
    trainer.state.exploration.reset(1)
    ou_state = trainer.state.exploration.ou_state
    assert ou_state[1, 0] == 0.0 != ou_state[0, 0]
    trainer.close()


def test_sync_and_async_vector_envs_learn_exactly_the_same(tmp_path):
    finals = []
    for mode in ("sync", "async"):
        config = tiny_config(tmp_path, run_name=mode, num_envs=2, vector_mode=mode,
                             max_timesteps=250)
        trainer = Trainer(config, DEVICE, interactive=False)
        finals.append(load_checkpoint(trainer.run(create_run(config)).checkpoint))
    assert_same_state(*finals)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_with_transitions_not_yet_handed_out_is_bit_exact(tmp_path, mode):
    full_run(tmp_path, num_envs=3, vector_mode=mode)
    ckpt_dir = tmp_path / "checkpoints" / "full"
    middle = load_checkpoint(ckpt_dir / "checkpoint_step_100.pt")
    # 100 env steps = 33 vector steps of 3 plus one: 2 transitions of the 34th pending.
    assert [t["env"] for t in middle["trainer"]["pending"]] == [1, 2]
    assert [e["length"] for e in middle["trainer"]["episodes"]] == [34, 33, 33]
    assert_fork_matches_the_full_run(tmp_path, 100)
    before = {p.name: p.read_bytes() for p in ckpt_dir.iterdir()}
    refused = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                       str(ckpt_dir / "checkpoint_step_100.pt"),
                                       "--set", "num_envs=2", "--run-name", "other"])
    assert refused.exit_code == 2 and "cannot change 'num_envs'" in refused.output
    assert {p.name: p.read_bytes() for p in ckpt_dir.iterdir()} == before


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_whose_first_transition_ends_an_episode_is_bit_exact(tmp_path, mode):
    # Two 50-step episodes end in the 50th vector step: env steps 99 and 100. At 99, env
    # 1's last transition is pending; handing it out restarts env 1 before any vector
    # step of the resumed run (the sync vector env failed there: it had no observations).
    full_run(tmp_path, env_name="fake_envs:FakeShortPendulum-v0", num_envs=2,
             vector_mode=mode, checkpoint_freq=33)
    middle = load_checkpoint(tmp_path / "checkpoints" / "full" / "checkpoint_step_99.pt")
    [pending] = middle["trainer"]["pending"]
    assert pending["env"] == 1 and pending["truncated"]
    assert_fork_matches_the_full_run(tmp_path, 99)


def test_rewards_of_interleaved_envs_stay_with_their_episodes():
    analyzer = RewardAnalyzer(window=10, num_envs=2)
    for step in range(3):
        analyzer.add(float(step), env=0)
        analyzer.add(-10.0 * step, env=1)
    assert analyzer.end_episode(env=1).tolist() == [0.0, -10.0, -20.0]
    analyzer.add(5.0, env=1)
    assert analyzer.end_episode(env=0).tolist() == [0.0, 1.0, 2.0]
    restored = RewardAnalyzer(window=10, num_envs=2)
    restored.load_state_dict(analyzer.state_dict())
    assert restored.end_episode(env=1).tolist() == [5.0]


def test_the_state_action_map_samples_every_env_with_its_own_episode_steps(tmp_path):
    # 3 envs, 750 env steps: 250 each, so each finished a 200-step episode and is 50
    # steps into the next; the map samples every env's acting call (rate about 0.93).
    config = tiny_config(tmp_path, run_name="map", num_envs=3, max_timesteps=750,
                         eval_freq=1000)
    trainer = Trainer(config, DEVICE, interactive=False)
    trainer.run(create_run(config))
    sa = trainer.diagnostics.map
    assert sa._episode_step == [50, 50, 50]
    for rows in sa._episode_rows:
        steps = [step for _, step in rows]
        assert 40 <= len(steps) <= 50 and steps == sorted(set(steps)) and steps[-1] <= 49
    # The finished episodes' samples have their return-to-go, the current ones not yet.
    current = [row for rows in sa._episode_rows for row, _ in rows]
    assert np.isnan(sa.return_to_go[current]).all()
    assert np.isfinite(sa.return_to_go[:sa.size]).sum() == sa.size - len(current) > 300


def test_num_envs_is_a_documented_config_key():
    config = load_config("pendulum_ddpg.yaml", ["num_envs=4", "vector_mode=async"])
    assert config.num_envs == 4 and config.vector_mode == "async"
    result = CliRunner().invoke(cli, ["train", "--config", "pendulum_ddpg.yaml",
                                      "--set", "vector_mode=fork"])
    assert result.exit_code == 2 and "vector_mode" in result.output
