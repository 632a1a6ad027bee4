"""Environment creation: unknown ids, unsupported spaces, user modules, seeding."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

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


class ShapedEnv(gym.Env):
    """An env observing `space`, with Pendulum's actions: only made, never stepped."""

    def __init__(self, space: gym.Space) -> None:
        self.observation_space = space
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float32)


def make_shaped(space: gym.Space):
    gym.register("TestShaped-v0", entry_point=ShapedEnv, kwargs={"space": space},
                 disable_env_checker=True)
    try:
        return make_env("TestShaped-v0")
    finally:
        gym.registry.pop("TestShaped-v0")


@pytest.mark.parametrize("space", [
    spaces.Box(0, 255, (96, 96, 3), np.uint8),  # CarRacing's frames
    spaces.Box(0.0, 1.0, (3, 64, 64), np.float32),  # normalised, channels first
    spaces.Dict({"pixels": spaces.Box(0, 255, (84, 84), np.uint8),
                 "speed": spaces.Box(-1.0, 1.0, (1,), np.float32)}),
])
def test_image_observations_are_refused_in_one_line_naming_what_to_use(space):
    with pytest.raises(EnvError, match=r"observes images \(a (uint8|float32) Box of shape "
                                       r".*convolutional policy \(SB3's \"CnnPolicy\"\)"):
        make_shaped(space)


def test_small_vector_and_matrix_observations_are_not_images():
    assert make_shaped(spaces.Box(-1.0, 1.0, (4, 3), np.float32)).observation_space.shape \
        == (12,)


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


def test_train_refuses_an_image_env_with_exit_2_and_writes_nothing(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from rltrain.scripts.cli import cli

    monkeypatch.chdir(tmp_path)
    gym.register("TestPixels-v0", entry_point=ShapedEnv,
                 kwargs={"space": spaces.Box(0, 255, (96, 96, 3), np.uint8)},
                 disable_env_checker=True)
    try:
        result = CliRunner().invoke(cli, ["train", "--env", "TestPixels-v0", "--steps", "2000"])
    finally:
        gym.registry.pop("TestPixels-v0")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "observes images" in errors[0]
    assert "Traceback" not in result.output
    assert not any((tmp_path / "checkpoints").glob("*/*.pt"))
