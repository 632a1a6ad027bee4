"""normalize (running observation and reward statistics) and env_kwargs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from test_resume import (
    assert_fork_matches_the_full_run,
    assert_same_state,
    full_run,
)

import rltrain
from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.config.env import NormalizeConfig
from rltrain.utils.errors import ConfigError, EnvError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import create_run
from rltrain.utils.training.envs import make_env
from rltrain.utils.training.evaluation import evaluate
from rltrain.utils.training.normalize import Normalizer, RunningMeanStd

from conftest import DEVICE, tiny_config

BOTH = {"observations": True, "rewards": True}


def test_running_statistics_are_numpys_mean_and_var_of_what_was_seen():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 5, 2, 7, 1)]
    rms = RunningMeanStd()
    for batch in batches:
        rms.update(batch)
    seen = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean, seen.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(rms.var, seen.var(axis=0), rtol=1e-12)
    assert rms.count == len(seen)


def test_observations_are_normalised_with_the_statistics_and_clipped():
    normalizer = Normalizer(NormalizeConfig(observations=True, clip=2.0), 0.99, num_envs=2)
    obs = np.array([[1.0, 10.0], [3.0, 30.0]])
    normalizer.update_observations(obs)
    normalizer.update_observations(np.array([[np.nan, 0.0], [2.0, 20.0]]))  # NaN row left out
    seen = np.array([[1.0, 10.0], [3.0, 30.0], [2.0, 20.0]])
    expected = (np.array([3.0, 30.0]) - seen.mean(0)) / np.sqrt(seen.var(0) + 1e-8)
    np.testing.assert_allclose(normalizer.observation(np.array([3.0, 30.0])), expected,
                               rtol=1e-6)
    assert normalizer.observation(np.array([100.0, 0.0]))[0] == 2.0  # clipped


def test_rewards_are_scaled_by_the_std_of_the_discounted_return():
    normalizer = Normalizer(NormalizeConfig(rewards=True), 0.5, num_envs=1)
    discounted, returns = 0.0, []
    for reward, done in [(1.0, False), (2.0, False), (4.0, True), (8.0, False)]:
        discounted = discounted * 0.5 + reward
        returns.append(discounted)
        scaled = normalizer.rewards(np.array([reward]), np.array([done]))[0]
        expected = np.clip(reward / np.sqrt(np.var(returns) + 1e-8), -10, 10)  # clip 10
        assert scaled == pytest.approx(expected)
        if done:
            discounted = 0.0


def test_with_normalize_off_everything_passes_through():
    normalizer = Normalizer(NormalizeConfig(), 0.99, num_envs=1)
    obs, rewards = np.array([[5.0, 6.0]]), np.array([3.0])
    normalizer.update_observations(obs)
    assert normalizer.observation(obs) is obs
    assert normalizer.rewards(rewards, np.array([False])) is rewards


def test_a_training_run_keeps_the_statistics_of_its_observations(tmp_path):
    config = tiny_config(tmp_path, max_timesteps=150, checkpoint_freq=150, run_name="stats",
                         normalize={"observations": True})
    trainer = Trainer(config, DEVICE, interactive=False)
    seen = []
    step_all = trainer.state.collector._step_all

    def recording(env_steps, policy):
        step_all(env_steps, policy)
        seen.extend(np.asarray(e.obs, dtype=np.float64) for e in trainer.state.collector.episodes)

    trainer.state.collector._step_all = recording
    assert trainer.run(create_run(config)).status == "finished"
    payload = load_checkpoint(tmp_path / "checkpoints" / "stats" / "checkpoint_step_150.pt")
    stats = payload["normalize"]["observations"]
    np.testing.assert_allclose(stats["mean"], np.mean(seen, axis=0), rtol=1e-10)
    np.testing.assert_allclose(stats["var"], np.var(seen, axis=0), rtol=1e-10)
    assert stats["count"] == 150
    # the buffer stores what the agent saw: the normalised observations
    stored = trainer.state.buffer.state_dict()["data"][:150, :3].numpy()
    assert np.abs(stored).max() <= 10.0 and abs(stored.mean()) < 1.5


@pytest.fixture(scope="module")
def normalised(tmp_path_factory) -> Path:
    """Run 'full' with both statistics, its checkpoints every 50 steps, shared: tests read
    its files and add forks beside it, never change it."""
    root = tmp_path_factory.mktemp("normalised")
    full_run(root, normalize=BOTH)
    return root


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> Path:
    """The checkpoint folder of run 'full' with observation statistics only, shared."""
    root = tmp_path_factory.mktemp("observed")
    full_run(root, normalize={"observations": True})
    return root / "checkpoints" / "full"


def test_a_normalised_run_resumed_is_bit_exact(normalised):
    assert_fork_matches_the_full_run(normalised, 150)


def test_a_normalised_run_of_two_envs_resumed_is_bit_exact(tmp_path):
    full_run(tmp_path, normalize=BOTH, num_envs=2)
    assert_fork_matches_the_full_run(tmp_path, 150)


def test_pause_then_resume_in_place_equals_the_uninterrupted_run(tmp_path, normalised):
    config = tiny_config(tmp_path / "b", run_name="full", keep_checkpoints=100,
                         checkpoint_freq=50, normalize=BOTH)
    trainer = Trainer(config, DEVICE, interactive=False)
    paths = create_run(config)
    original = trainer._step

    def step_and_pause():
        original()
        if trainer.state.counters.env_steps == 170:
            trainer.monitor.request_outside_pause("test", "pause for the test", 170)

    trainer._step = step_and_pause
    outcome = trainer.run(paths)
    assert outcome.status == "paused"
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(outcome.checkpoint)])
    assert result.exit_code == 0, result.output
    uninterrupted = load_checkpoint(normalised / "checkpoints" / "full" /
                                    "checkpoint_step_300.pt")
    assert uninterrupted["total_steps"] == 300
    assert_same_state(uninterrupted, load_checkpoint(tmp_path / "b" / "checkpoints" / "full" /
                                                     "checkpoint_step_300.pt"))


def test_eval_and_load_policy_use_the_checkpoints_frozen_statistics(observed):
    path = observed / "checkpoint_step_300.pt"
    payload = load_checkpoint(path)
    stats = payload["normalize"]["observations"]
    mean, std = np.asarray(stats["mean"]), np.sqrt(np.asarray(stats["var"]) + 1e-8)
    policy = rltrain.load_policy(path)
    obs = np.array([0.5, -0.5, 1.0], dtype=np.float32)
    with torch.inference_mode():
        by_hand = policy.actor(torch.as_tensor(
            np.clip((obs - mean) / std, -10, 10), dtype=torch.float32).unsqueeze(0))[0].numpy()
    np.testing.assert_allclose(policy.predict(obs)[0], by_hand, rtol=1e-6)
    # rltrain eval's return is the one an evaluation by hand with those statistics gets
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(path), "--episodes", "1"])
    assert result.exit_code == 0, result.output
    expected = evaluate(lambda o: policy.predict(o)[0], make_env("Pendulum-v1"), 1, 3)
    assert f"mean return {expected.mean:.2f}" in result.output


def test_behaviour_videos_act_on_the_observations_normalised_and_frozen(tmp_path,
                                                                        monkeypatch):
    """A video taken in training acts as evaluation does: on the env's observations
    normalised with the run's current statistics, which its episode does not change."""
    import gymnasium as gym

    from rltrain.utils.diagnosis.measure import snapshots

    config = tiny_config(tmp_path, max_timesteps=150, run_name="video",
                         normalize={"observations": True}, diagnostics={"snapshot_freq": 150})
    trainer = Trainer(config, DEVICE, interactive=False)
    normalizer, actor = trainer.state.collector.normalizer, trainer.state.agent.actor
    recorded, counts = [], []

    def record_episode(policy, env_name, seed, path, env_kwargs=None):  # no encoding
        env, count = gym.make(env_name), normalizer.obs_rms.count
        obs, _ = env.reset(seed=seed)
        for _ in range(20):
            action = policy(obs)
            with torch.no_grad():
                seen, raw = (torch.as_tensor(o, dtype=torch.float32, device=DEVICE)[None]
                             for o in (normalizer.observation(obs), obs))
                recorded.append((action, actor(seen)[0].cpu().numpy(),
                                 actor(raw)[0].cpu().numpy()))
            obs = env.step(action)[0]
        counts.append((count, normalizer.obs_rms.count))
        return path

    monkeypatch.setattr(snapshots, "record_episode", record_episode)
    assert trainer.run(create_run(config)).status == "finished"
    actions, on_normalised, on_raw = (np.array(a) for a in zip(*recorded, strict=True))
    assert len(actions) == 20 and counts == [(150, 150)]  # frozen: the episode added none
    np.testing.assert_allclose(actions, on_normalised, rtol=1e-5, atol=1e-6)
    assert np.abs(on_normalised - on_raw).max() > 1e-2  # the statistics change the actions


def test_env_kwargs_reach_every_env(tmp_path):
    config = tiny_config(tmp_path, env_kwargs={"g": 3.5}, num_envs=2)
    trainer = Trainer(config, DEVICE, interactive=False)
    try:
        assert trainer.state.eval_env.unwrapped.g == 3.5
        assert trainer.state.collector.envs.get_attr("g") == (3.5, 3.5)
    finally:
        trainer.close()
    assert make_env("Pendulum-v1", env_kwargs={"g": 1.5}).unwrapped.g == 1.5


def test_env_kwargs_an_env_does_not_take_is_one_line():
    with pytest.raises(EnvError, match="refused env_kwargs"):
        make_env("Pendulum-v1", env_kwargs={"no_such_kwarg": 1})


@pytest.mark.parametrize("value, message", [
    ([1, 2], "must be a mapping"), ({"g": {1: object()}}, "plain YAML data")])
def test_env_kwargs_must_be_plain_data(tmp_path, value, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(tmp_path, env_kwargs=value)


def test_forged_statistics_are_refused_in_one_line(tmp_path, observed):
    payload = load_checkpoint(observed / "checkpoint_step_150.pt")
    payload["normalize"]["observations"]["mean"] = [0.0] * 5  # Pendulum's obs_dim is 3
    payload["normalize"]["observations"]["var"] = [1.0] * 5
    forged = tmp_path / "forged.pt"
    torch.save(payload, forged)
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(forged)])
    assert result.exit_code == 2, result.output
    assert "'normalize.observations.mean'" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_rltrain_eval_makes_its_env_with_the_runs_env_kwargs(tmp_path, monkeypatch):
    import rltrain.scripts.commands.eval_command as eval_module

    full_run(tmp_path, env_kwargs={"g": 4.0}, max_timesteps=150)
    made = []
    real = eval_module.make_env

    def spy(name, **kwargs):
        env = real(name, **kwargs)
        made.append(env.unwrapped.g)
        return env

    monkeypatch.setattr(eval_module, "make_env", spy)
    path = tmp_path / "checkpoints" / "full" / "checkpoint_step_150.pt"
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(path), "--episodes", "1"])
    assert result.exit_code == 0, result.output
    assert made == [4.0]
