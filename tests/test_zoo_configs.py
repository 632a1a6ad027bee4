"""Hyperparameters per env id: the shipped configs/<algo>.yaml and RL Zoo-format files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.config.zoo import (
    is_per_env,
    per_env_section,
    shipped_per_env_file,
    translate,
    utd_ratio,
)
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.safe_yaml import read_yaml_mapping

from conftest import tiny_dict

ENVS = ("Pendulum-v1", "MountainCarContinuous-v0", "LunarLanderContinuous-v3",
        "BipedalWalker-v3", "Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Ant-v5")

ZOO_TD3 = """\
LunarLanderContinuous-v3:
  n_timesteps: !!float 3e5
  policy: 'MlpPolicy'
  gamma: 0.98
  buffer_size: 200000
  learning_starts: 10000
  noise_type: 'normal'
  noise_std: 0.1
  gradient_steps: 1
  train_freq: 1
  learning_rate: !!float 1e-3
  policy_kwargs: "dict(net_arch=[400, 300])"
"""


def shown(*args: str) -> tuple[dict, str]:
    result = CliRunner().invoke(cli, ["config", "show", *args])
    assert result.exit_code == 0, result.output
    out = result.stdout
    return yaml.safe_load(out), result.stderr


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
@pytest.mark.parametrize("env", ENVS)
def test_every_shipped_entry_is_a_valid_config(algo, env):
    raw = read_yaml_mapping(shipped_per_env_file(algo))
    assert is_per_env(raw)
    config = config_from_dict(per_env_section(raw, env, f"{algo}.yaml"))
    assert (config.env_name, config.algo) == (env, algo)
    assert config.actor_lr == config.critic_lr == 1e-3  # RL Zoo's learning_rate
    assert config.hidden_sizes == (400, 300)


def test_algo_and_env_take_the_shipped_entry():
    config, note = shown("--algo", "td3", "--env", "LunarLanderContinuous-v3")
    assert config["algo"] == "td3" and config["env_name"] == "LunarLanderContinuous-v3"
    assert (config["max_timesteps"], config["gamma"], config["replay_buffer_size"],
            config["learning_starts"]) == (300_000, 0.98, 200_000, 10_000)
    assert note == ""


def test_mountain_car_takes_ou_noise():
    config, _ = shown("--algo", "ddpg", "--env", "MountainCarContinuous-v0")
    assert (config["noise_type"], config["exploration_noise"]) == ("ou", 0.5)


def test_flags_override_the_entry():
    config, _ = shown("--algo", "td3", "--env", "Pendulum-v1", "--steps", "12345",
                      "--set", "gamma=0.9")
    assert (config["max_timesteps"], config["gamma"]) == (12345, 0.9)


def test_env_without_entry_takes_the_defaults_and_says_so():
    config, note = shown("--algo", "td3", "--env", "InvertedPendulum-v5")
    expected = {**_defaults(), "env_name": "InvertedPendulum-v5", "algo": "td3"}
    expected["td3"] = config["td3"]
    assert config == expected
    assert len(note.strip().splitlines()) == 1 and "InvertedPendulum-v5" in note


def test_no_config_and_no_env_shows_the_default_config():
    config, note = shown()
    assert config == _defaults()
    assert note == ""  # config show says nothing of it; train does (below)


def _defaults() -> dict:
    from rltrain.utils.config.schema import config_to_dict

    return config_to_dict(TrainConfig())


def test_rl_zoo_file_is_translated(tmp_path):
    path = tmp_path / "td3.yml"
    path.write_text(ZOO_TD3)
    config, _ = shown("--config", str(path))
    assert config["algo"] == "td3"  # RL Zoo names the algo by the file
    assert (config["env_name"], config["max_timesteps"], config["replay_buffer_size"],
            config["actor_lr"], config["critic_lr"], config["noise_type"],
            config["exploration_noise"], config["hidden_sizes"], config["utd_ratio"]) == \
        ("LunarLanderContinuous-v3", 300_000, 200_000, 1e-3, 1e-3, "gaussian", 0.1,
         [400, 300], 1)


def test_per_env_file_picks_the_section_for_env(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"Pendulum-v1": {"gamma": 0.9},
                                    "MountainCarContinuous-v0": {"gamma": 0.8}}))
    config, _ = shown("--config", str(path), "--env", "MountainCarContinuous-v0")
    assert (config["env_name"], config["gamma"], config["algo"]) == \
        ("MountainCarContinuous-v0", 0.8, "ddpg")


@pytest.mark.parametrize("section, message", [
    ({"n_envs": 4}, "RL Zoo's 'n_envs' is not supported"),
    ({"learning_rate": "lin_7e-4"}, "learning-rate schedules are not supported"),
    ({"policy": "CnnPolicy"}, "MlpPolicy only"),
    ({"policy_kwargs": "dict(net_arch=__import__('os').getcwd())"}, "policy_kwargs must be"),
    ({"policy_kwargs": "dict(n_critics=1)"}, "policy_kwargs n_critics=1 is not supported"),
    ({"train_freq": [1, "episode"], "gradient_steps": 10}, "no rltrain equivalent"),
    ({"noise_type": "pink"}, "noise_type 'pink' is not supported"),
])
def test_unsupported_zoo_keys_are_refused(section, message):
    with pytest.raises(ConfigError, match=message):
        translate(section, "here")


def test_refusal_on_the_command_line_is_one_line(tmp_path):
    path = tmp_path / "zoo.yml"
    path.write_text("Pendulum-v1:\n  n_envs: 4\n")
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(path)])
    assert result.exit_code == 2
    assert "n_envs" in result.output and "supported:" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_python_tags_are_refused_by_the_safe_loader(tmp_path):
    path = tmp_path / "zoo.yml"
    path.write_text("Pendulum-v1:\n  callback: !!python/name:os.system\n")
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output


@pytest.mark.parametrize("freq, steps, ratio", [
    (None, None, 1), (1, 1, 1), (2, 4, 2), ([1, "step"], 3, 3), ([1, "episode"], -1, 1)])
def test_utd_ratio_from_train_freq_and_gradient_steps(freq, steps, ratio):
    assert utd_ratio(freq, steps, "here") == ratio


def test_net_arch_per_network_and_activation():
    raw = translate({"policy_kwargs": "dict(net_arch=dict(pi=[64, 64], qf=[400, 300]), "
                                      "activation_fn=nn.Tanh)"}, "here")
    config = config_from_dict(raw)
    assert config.networks.actor.hidden_sizes == (64, 64)
    assert config.networks.critic.hidden_sizes == (400, 300)
    assert config.networks.actor.activation == config.networks.critic.activation == "tanh"


def test_flat_config_files_work_unchanged(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    config, note = shown("--config", str(path))
    assert config["max_timesteps"] == 300 and note == ""
    shipped, _ = shown("--config", "pendulum_td3.yaml")
    assert shipped["algo"] == "td3" and shipped["seed"] == 42


def test_train_without_config_trains_the_env_entry(tmp_path):
    """`rltrain train --algo td3 --env Pendulum-v1` trains with that entry (shortened)."""
    result = CliRunner().invoke(cli, [
        "train", "--algo", "td3", "--env", "Pendulum-v1", "--run-name", "zoo", "--steps",
        "120", "--set", "learning_starts=50", "--set", "hidden_sizes=[16,16]",
        "--set", f"log_dir={tmp_path / 'logs'}", "--set",
        f"checkpoint_dir={tmp_path / 'ck'}", "--set", "eval_freq=120",
        "--set", "n_eval_episodes=1", "--set", "batch_size=16"])
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load(Path(tmp_path / "logs" / "zoo" / "config.yaml").read_text())
    assert (saved["algo"], saved["gamma"], saved["replay_buffer_size"]) == ("td3", 0.98, 200_000)


def test_train_without_config_or_env_says_it_trains_the_default_config(tmp_path):
    result = CliRunner().invoke(cli, [
        "train", "--run-name", "plain", "--steps", "60", "--set", "learning_starts=20",
        "--set", "hidden_sizes=[16,16]", "--set", f"log_dir={tmp_path / 'logs'}",
        "--set", f"checkpoint_dir={tmp_path / 'ck'}", "--set", "batch_size=16",
        "--set", "n_eval_episodes=1", "--set", "eval_freq=60"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "default config" in line]
    assert len(notes) == 1 and "Pendulum-v1" in notes[0]
    saved = yaml.safe_load(Path(tmp_path / "logs" / "plain" / "config.yaml").read_text())
    assert saved["env_name"] == "Pendulum-v1" and saved["gamma"] == TrainConfig().gamma


@pytest.mark.parametrize("text", [
    "dict(net_arch=" + "-" * 200_000 + "1)",  # a MemoryError in Python's parser
    "dict(net_arch=" + "1+" * 100_000 + "1)",  # a RecursionError
    "dict(net_arch=[" + "64, " * 50_000 + "64])",  # plain, but 200 KB
])
def test_a_huge_rl_zoo_dict_text_is_one_short_line(tmp_path, text):
    path = tmp_path / "zoo.yml"
    path.write_text(yaml.safe_dump({"Pendulum-v1": {"policy": "MlpPolicy",
                                                    "policy_kwargs": text}}))
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(path),
                                      "--env", "Pendulum-v1"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert "policy_kwargs must be a mapping or a \"dict(key=literal, ...)\" text of at most "\
           "10000 characters" in result.output
    assert len(result.output) < 600


# RL Zoo's own entries (hyperparams/crossq.yml and tqc.yml, commit 22e3ff2), as it writes them.
ZOO_CROSSQ = """\
Pendulum-v1:
  n_timesteps: 20000
  policy: 'MlpPolicy'
  policy_delay: 2
  policy_kwargs: "dict(net_arch=[256, 256])"

HalfCheetah-v4: &mujoco-defaults
  buffer_size: 1_000_000
  learning_rate: !!float 1e-3
  learning_starts: 5000
  n_timesteps: !!float 5e6
  policy: 'MlpPolicy'
  policy_delay: 3
  policy_kwargs: "dict(net_arch=dict(pi=[256, 256], qf=[2048, 2048]))"
"""
ZOO_TQC = """\
Pendulum-v1:
  n_timesteps: 20000
  policy: 'MlpPolicy'
  learning_rate: !!float 1e-3

Hopper-v4:
  n_timesteps: !!float 1e6
  policy: 'MlpPolicy'
  learning_starts: 10000
  top_quantiles_to_drop_per_net: 5
"""


@pytest.mark.parametrize("algo, text, env, expected", [
    ("crossq", ZOO_CROSSQ, "Pendulum-v1", {"crossq": {"policy_delay": 2},
                                           "hidden_sizes": [256, 256]}),
    ("crossq", ZOO_CROSSQ, "HalfCheetah-v4", {
        "crossq": {"policy_delay": 3}, "actor_lr": 1e-3, "learning_starts": 5000,
        "networks": {"actor": {"hidden_sizes": [256, 256]},
                     "critic": {"hidden_sizes": [2048, 2048]}}}),
    ("tqc", ZOO_TQC, "Pendulum-v1", {"actor_lr": 1e-3, "max_timesteps": 20000}),
    ("tqc", ZOO_TQC, "Hopper-v4", {"tqc": {"top_quantiles_to_drop_per_net": 5},
                                   "learning_starts": 10000}),
])
def test_rl_zoos_crossq_and_tqc_files_load_into_the_algorithms_own_section(
        tmp_path, algo, text, env, expected):
    """RL Zoo's `policy_delay` is crossq's in crossq.yml (td3's only in td3.yml)."""
    path = tmp_path / f"{algo}.yml"
    path.write_text(text)
    config, _ = shown("--config", str(path), "--env", env)
    assert config["algo"] == algo and config["env_name"] == env
    for key, value in expected.items():
        if isinstance(value, dict) and key in (algo, "networks"):
            for name, part in value.items():
                assert config[key][name] == part if not isinstance(part, dict) else \
                    config[key][name]["hidden_sizes"] == part["hidden_sizes"], (key, name)
        else:
            assert config[key] == value, key


def test_the_command_lines_algo_names_the_options_of_any_rl_zoo_file(tmp_path):
    path = tmp_path / "mine.yml"  # a file named after no algorithm
    path.write_text("Pendulum-v1:\n  policy_delay: 2\n  n_timesteps: 5000\n")
    config, _ = shown("--config", str(path), "--algo", "crossq")
    assert (config["algo"], config["crossq"]["policy_delay"]) == ("crossq", 2)
    config, _ = shown("--config", str(path), "--algo", "td3")
    assert (config["algo"], config["td3"]["policy_delay"]) == ("td3", 2)
    refused = CliRunner().invoke(cli, ["config", "show", "--config", str(path)])
    assert refused.exit_code == 2  # ddpg has no policy_delay: SB3's name is pointed at
    assert "'td3.policy_delay' and 'crossq.policy_delay'" in refused.output


def test_an_algorithms_own_policy_kwargs_go_to_its_section():
    raw = translate({"policy_kwargs": "dict(n_quantiles=10, n_critics=3, net_arch=[64])"},
                    "here", "tqc")
    assert raw == {"tqc": {"n_quantiles": 10, "n_critics": 3}, "hidden_sizes": [64]}
    with pytest.raises(ConfigError, match=r"n_quantiles=10 is not supported \(net_arch, .*"
                                          r"nn.GELU; the algorithm's own: batch_norm_momentum"):
        translate({"policy_kwargs": "dict(n_quantiles=10)"}, "here", "crossq")


@pytest.mark.parametrize("algo", ["crossq", "tqc"])
@pytest.mark.parametrize("env", ENVS)
def test_every_shipped_crossq_and_tqc_entry_is_a_valid_config(algo, env):
    raw = read_yaml_mapping(shipped_per_env_file(algo))
    config = config_from_dict(per_env_section(raw, env, f"{algo}.yaml"))
    assert (config.env_name, config.algo) == (env, algo)
    if algo == "crossq":  # no target network, so no tau; a wide critic off Pendulum
        assert config.tau == TrainConfig().tau
        assert env == "Pendulum-v1" or env.startswith("Mountain") or \
            config.networks.critic.hidden_sizes[0] >= 1024
