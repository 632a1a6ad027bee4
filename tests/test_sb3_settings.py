"""An SB3 run's record and fixes in SB3's own names: config.yaml keeps the model's real
settings (`library`, and the rltrain keys the rules judge with), num_envs is counted in
env steps everywhere, and a finding's `suggested_set` speaks SB3's arguments."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from stable_baselines3 import SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

import rltrain
from rltrain.integrations import Watcher
from rltrain.integrations.sb3 import RltrainCallback
from rltrain.integrations.sb3_settings import SB3Keys
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.findings import Finding

ENV = "fake_envs:FakePoint-v0"  # 2-d observations, 1-d actions in [0, 4]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def recorded(tmp_path, run: str) -> dict:
    return yaml.safe_load((tmp_path / "logs" / run / "config.yaml").read_text())


def test_config_yaml_records_the_models_own_settings_in_sb3s_names(tmp_path):
    model = TD3("MlpPolicy", ENV, learning_rate=1e-3, buffer_size=5000, learning_starts=50,
                batch_size=32, tau=0.01, gamma=0.95, train_freq=(2, "step"), gradient_steps=2,
                action_noise=NormalActionNoise(np.zeros(1), 0.2 * np.ones(1)),
                policy_kwargs={"net_arch": [16, 8]}, seed=3, device="cpu")
    model.learn(100, callback=RltrainCallback("td3"))
    config = recorded(tmp_path, "td3")
    library = config["library"]
    assert {k: library[k] for k in ("algorithm", "learning_rate", "buffer_size",
                                    "learning_starts", "batch_size", "tau", "gamma",
                                    "train_freq", "gradient_steps", "n_envs", "seed",
                                    "policy_delay", "target_policy_noise")} == {
        "algorithm": "TD3", "learning_rate": 1e-3, "buffer_size": 5000, "learning_starts": 50,
        "batch_size": 32, "tau": 0.01, "gamma": 0.95, "train_freq": [2, "step"],
        "gradient_steps": 2, "n_envs": 1, "seed": 3, "policy_delay": 2,
        "target_policy_noise": 0.2}
    assert library["action_noise"] == {"type": "NormalActionNoise", "mu": [0.0],
                                       "sigma": [0.2]}
    assert library["policy_kwargs"]["net_arch"] == [16, 8]
    # the rltrain keys the rules judge with are the model's, not rltrain's defaults
    assert (config["actor_lr"], config["critic_lr"], config["exploration_noise"]) == (
        1e-3, 1e-3, 0.2)
    assert config["networks"]["actor"]["hidden_sizes"] == [16, 8]
    assert config["networks"]["critic"]["hidden_sizes"] == [16, 8]
    assert (config["replay_buffer_size"], config["utd_ratio"]) == (5000, 1)  # 2 per 2 steps


def test_sac_records_its_temperature_and_separate_networks(tmp_path):
    model = SAC("MlpPolicy", ENV, learning_starts=50, batch_size=32, device="cpu", seed=0,
                policy_kwargs={"net_arch": {"pi": [8], "qf": [16, 16]}})
    model.learn(60, callback=RltrainCallback("sac"))
    config = recorded(tmp_path, "sac")
    assert config["library"]["ent_coef"] == "auto"
    assert config["library"]["learning_rate"] == 3e-4
    assert config["library"]["action_noise"] is None
    assert config["exploration_noise"] == 0.1  # rltrain's default: sac adds no action noise
    assert config["networks"]["actor"]["hidden_sizes"] == [8]
    assert config["networks"]["critic"]["hidden_sizes"] == [16, 16]


def test_num_envs_is_counted_in_env_steps_of_every_env(tmp_path):
    env = make_vec_env(ENV, n_envs=2, seed=0)
    model = TD3("MlpPolicy", env, buffer_size=1000, learning_starts=50, batch_size=32,
                policy_kwargs={"net_arch": [8]}, device="cpu", seed=0,
                action_noise=OrnsteinUhlenbeckActionNoise(np.zeros(1), 0.3 * np.ones(1)))
    model.learn(100, callback=RltrainCallback("vec"))
    config = recorded(tmp_path, "vec")
    # SB3's buffer_size counts transitions of all envs, as rltrain's replay_buffer_size
    assert (config["num_envs"], config["library"]["n_envs"]) == (2, 2)
    assert (config["replay_buffer_size"], config["library"]["buffer_size"]) == (1000, 1000)
    assert (config["noise_type"], config["exploration_noise"]) == ("ou", 0.3)


class QNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(3, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.q(torch.cat([obs, action], 1))


def test_a_watcher_given_more_envs_than_its_config_says_is_refused_in_one_line(tmp_path):
    env = gym.make(ENV)
    actor = torch.nn.Sequential(torch.nn.Linear(2, 1))
    with Watcher(actor, QNet(), env.observation_space, env.action_space, run_name="w") as watcher, \
            pytest.raises(ConfigError, match=r"^after_env_step got the step of 2 env\(s\) "
                          r"but the Watcher's config has num_envs 1: set num_envs=2 in its "
                          r"config$"):
        rows = np.zeros((2, 2), np.float32)
        watcher.after_env_step(rows, np.zeros((2, 1)), [0.0, 0.0], rows, [False] * 2,
                               [False] * 2)


class Model:
    """What SB3Keys reads of a model."""

    n_envs = 2
    action_space = gym.spaces.Box(-1, 1, (3,))

    class train_freq:  # noqa: N801 (SB3's TrainFreq namedtuple)
        frequency = 1

        class unit:  # noqa: N801
            value = "step"


@pytest.mark.parametrize("suggested, sb3, missing", [
    ({"actor_lr": 1e-4, "critic_lr": 3e-5}, {"learning_rate": 3e-5}, []),
    ({"exploration_noise": 0.3, "noise_type": "ou"},
     {"action_noise": {"type": "OrnsteinUhlenbeckActionNoise", "sigma": 0.3}}, []),
    ({"replay_buffer_size": 10_000, "tau": 0.01, "gamma": 0.98},
     {"buffer_size": 10_000, "tau": 0.01, "gamma": 0.98}, []),
    ({"utd_ratio": 2, "td3.policy_delay": 3}, {"gradient_steps": 4, "policy_delay": 3}, []),
    ({"sac.ent_coef": 0.1, "hidden_sizes": [64, 64]},
     {"ent_coef": 0.1, "policy_kwargs": {"net_arch": [64, 64]}}, []),
    ({"grad_clip_norm": 1.0, "critic_lr": 1e-4}, {"learning_rate": 1e-4}, ["grad_clip_norm"]),
    # an algorithm's own options by the registry's names, policy_kwargs' ones in that dict
    ({"crossq.ent_coef": "auto", "crossq.policy_delay": 1},
     {"ent_coef": "auto", "policy_delay": 1}, []),
    ({"tqc.n_quantiles": 10, "hidden_sizes": [64], "tqc.top_quantiles_to_drop_per_net": 3},
     {"policy_kwargs": {"n_quantiles": 10, "net_arch": [64]},
      "top_quantiles_to_drop_per_net": 3}, []),
])
def test_suggested_sets_are_translated_to_sb3_arguments(suggested, sb3, missing):
    assert SB3Keys(Model()).translate(suggested) == (sb3, missing)


class PPOModel:
    """What SB3Keys reads of a PPO model: its own arguments by SB3's names."""

    n_envs, learning_rate, ent_coef, n_epochs, clip_range, vf_coef = 8, 1e-3, 0.0, 20, 0.2, 0.5
    action_space = gym.spaces.Discrete(2)


@pytest.mark.parametrize("suggested, sb3, missing", [
    ({"ent_coef": 0.01}, {"ent_coef": 0.01}, []),
    ({"n_epochs": 10}, {"n_epochs": 10}, []),
    ({"learning_rate": 3e-4}, {"learning_rate": 3e-4}, []),
    # a VecNormalize wrapper, as RL Zoo's `normalize` hyperparameter sets it up
    ({"normalize.rewards": True}, {"normalize": {"norm_reward": True}}, []),
    ({"normalize.rewards": True, "normalize.observations": True},
     {"normalize": {"norm_reward": True, "norm_obs": True}}, []),
])
def test_the_watched_families_rules_propose_sb3s_own_names(suggested, sb3, missing):
    assert SB3Keys(PPOModel()).translate(suggested) == (sb3, missing)


class DQNModel:
    """What SB3Keys reads of a DQN model."""

    n_envs, learning_rate, learning_starts, gradient_steps = 1, 6.3e-4, 0, 1
    action_space = gym.spaces.Discrete(4)

    class train_freq:  # noqa: N801 (SB3's TrainFreq namedtuple)
        frequency = 2000

        class unit:  # noqa: N801
            value = "step"


def test_a_dqn_schedule_is_proposed_in_sb3s_own_names():
    """update_schedule's and learning_not_started's fixes (rules/replay_schedule.py)."""
    keys = SB3Keys(DQNModel())
    assert keys.translate({"train_freq": 16, "gradient_steps": 1}) == (
        {"train_freq": 16, "gradient_steps": 1}, [])
    assert keys.translate({"learning_starts": 800}) == ({"learning_starts": 800}, [])


def test_a_finding_says_its_fix_in_sb3_terms_and_what_sb3_has_no_setting_for():
    finding = Finding(100, "critic_loss_explosion", 1e6, 1e4, "warn", "the critic loss grew",
                      suggested_set={"critic_lr": 1e-4, "grad_clip_norm": 1.0})
    shown = SB3Keys(Model()).finding(finding)
    assert shown.suggested_set == {"learning_rate": 1e-4}
    assert shown.message == ("the critic loss grew (in SB3: learning_rate=0.0001; SB3's one "
                             "learning_rate is both networks') (grad_clip_norm=1.0: no SB3 "
                             "setting does this)")


def test_a_real_finding_on_an_sb3_run_proposes_sb3s_learning_rate(tmp_path):
    model = TD3("MlpPolicy", ENV, learning_rate=3.0, learning_starts=100, batch_size=32,
                policy_kwargs={"net_arch": [16, 16]}, seed=0, device="cpu")
    model.learn(400, callback=RltrainCallback("lr"))
    found = {f["rule"]: f for f in rltrain.diagnose("lr")}
    explosion = found["critic_loss_explosion"]  # rltrain proposes critic_lr and a clip
    assert explosion["suggested_set"] == {"learning_rate": 0.3}
    assert explosion["message"].endswith(
        "(in SB3: learning_rate=0.3; SB3's one learning_rate is both networks') "
        "(grad_clip_norm=1.0: no SB3 setting does this)")
