"""Environment creation: unknown ids, unsupported spaces, user modules, seeding."""

from __future__ import annotations

import numpy as np
import pytest

from rltrain.utils.errors import EnvError
from rltrain.utils.seeding import TRAIN_EPISODES, derive_seed
from rltrain.utils.training.envs import make_env, space_dims


def test_unknown_id_lists_the_closest_registered_ids():
    with pytest.raises(EnvError, match="unknown environment id 'Pendulm-v1'.*Pendulum-v1"):
        make_env("Pendulm-v1")


def test_unknown_version_is_an_env_error():
    with pytest.raises(EnvError, match="module 'fake_envs' was imported but registers no "
                                       "'FakeNothing-v0'"):
        make_env("fake_envs:FakeNothing-v0")
    with pytest.raises(EnvError, match="unknown environment id 'Pendulum-v9'"):
        make_env("Pendulum-v9")


def test_missing_user_module_is_an_env_error():
    with pytest.raises(EnvError, match="cannot import its module"):
        make_env("no_such_module_xyz:Thing-v0")


@pytest.mark.parametrize("env_id", ["CartPole-v1", "fake_envs:FakeDiscrete-v0"])
def test_discrete_actions_are_refused(env_id):
    with pytest.raises(EnvError, match="need continuous bounded actions"):
        make_env(env_id)


def test_user_module_env_with_asymmetric_bounds():
    env = make_env("fake_envs:FakePoint-v0")
    obs_dim, action_dim, low, high = space_dims(env)
    assert (obs_dim, action_dim) == (2, 1)
    assert low.tolist() == [0.0] and high.tolist() == [4.0]


def test_episode_seeds_are_distinct_and_reproducible():
    seeds = [derive_seed(1, TRAIN_EPISODES, i) for i in range(100)]
    assert len(set(seeds)) == 100
    assert seeds == [derive_seed(1, TRAIN_EPISODES, i) for i in range(100)]
    env = make_env("Pendulum-v1")
    first, _ = env.reset(seed=seeds[5])
    env.reset(seed=seeds[6])
    again, _ = env.reset(seed=seeds[5])
    assert np.array_equal(first, again)


def test_a_box2d_env_without_box2d_names_the_extra(monkeypatch):
    import gymnasium as gym

    def missing(*args, **kwargs):
        raise gym.error.DependencyNotInstalled('Box2D is not installed, you can install it '
                                               'by run `pip install swig` followed by ...')

    monkeypatch.setattr(gym, "make", missing)
    with pytest.raises(EnvError) as caught:
        make_env("LunarLanderContinuous-v3")
    assert str(caught.value) == ("env 'LunarLanderContinuous-v3' needs Box2D: "
                                 'pip install "rltrain[box2d]"')


def test_action_bounds_too_wide_to_compute_with_are_refused(tmp_path, monkeypatch):
    """An action Box of +/-3e38: high - low overflows float32, the warm-up's random
    actions and the noise became inf and NaN, and the NaN was blamed on the env."""
    from click.testing import CliRunner

    from rltrain.scripts.cli import cli

    with pytest.raises(EnvError, match="high - low overflows float32"):
        make_env("fake_envs:FakeWideActionPendulum-v0")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["train", "--env", "fake_envs:FakeWideActionPendulum-v0"])
    assert result.exit_code == 2, result.output
    assert "has action bounds too wide to compute with" in result.output.splitlines()[-1]
    assert list(tmp_path.iterdir()) == []


def test_the_buffer_keeps_the_action_chosen_when_the_env_writes_into_its_array(tmp_path):
    """An env that clipped the action array it was given in place (to +/-0.5) changed
    the action the replay buffer stored after the step: the agent learned from actions
    it did not take."""
    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.run.folders import create_run

    from conftest import DEVICE, tiny_config

    config = tiny_config(tmp_path, env_name="fake_envs:FakeMutatingPendulum-v0",
                         max_timesteps=100, learning_starts=99)  # random actions, +/-2
    trainer = Trainer(config, DEVICE, interactive=False)
    trainer.run(create_run(config))
    actions = trainer.state.buffer.newest(100).actions
    assert actions.abs().max() > 1.0
