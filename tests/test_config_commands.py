"""`rltrain train`'s everyday flags (each the same as its --set) and `rltrain config show`.

(Beside tests/test_cli.py, which is near the file-size limit.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.config.loader import load_config
from rltrain.utils.config.schema import TrainConfig, config_to_dict, iter_fields

from conftest import tiny_dict


def write_config(tmp_path: Path, **overrides) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, **overrides)))
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def shown(*args: str) -> dict:
    result = invoke("config", "show", *args)
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.output)


def saved_config(tmp_path: Path, run: str) -> dict:
    saved = yaml.safe_load((tmp_path / "logs" / run / "config.yaml").read_text())
    saved.pop("run_name")
    return saved


def test_train_flags_equal_their_set_in_the_saved_config(tmp_path):
    config = str(write_config(tmp_path))
    flags = invoke("train", "--config", config, "--run-name", "flags", "--steps", "150",
                   "--seed", "5", "--algo", "td3", "--env", "Pendulum-v1", "--device", "cpu")
    assert flags.exit_code == 0, flags.output
    assert "finished at step 150" in flags.output
    sets = invoke("train", "--config", config, "--run-name", "sets", "--set",
                  "max_timesteps=150", "--set", "seed=5", "--set", "algo=td3", "--set",
                  "env_name=Pendulum-v1", "--set", "device=cpu")
    assert sets.exit_code == 0, sets.output
    saved = saved_config(tmp_path, "flags")
    assert (saved["max_timesteps"], saved["seed"], saved["algo"]) == (150, 5, "td3")
    assert saved == saved_config(tmp_path, "sets")


@pytest.mark.parametrize("flag, key, value", [
    ("--env", "env_name", "MountainCarContinuous-v0"), ("--algo", "algo", "td3"),
    ("--seed", "seed", "7"), ("--steps", "max_timesteps", "5000"),
    ("--device", "device", "cpu")])
def test_each_flag_is_its_set(tmp_path, flag, key, value):
    config = str(write_config(tmp_path))
    assert shown("--config", config, flag, value) == \
        shown("--config", config, "--set", f"{key}={value}")
    assert str(shown("--config", config, flag, value)[key]) == value


@pytest.mark.parametrize("args, message", [
    (["--steps", "500", "--set", "max_timesteps=600"],
     "--steps and --set max_timesteps=... both given; use one of them"),
    (["--seed", "abc"], "config key 'seed' must be an integer >= 0; got 'abc'"),
    (["--algo", "trpo"], "'algo' must be one of ddpg, td3, sac"),
    (["--algo", "dqn"], "algo dqn is watched, not trained, by rltrain"),
])
def test_a_bad_or_doubled_flag_is_one_line_and_exit_2(tmp_path, args, message):
    for command in (["train", "--config", str(write_config(tmp_path))], ["config", "show"]):
        result = invoke(*command, *args)
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "logs").exists()  # nothing was started


def test_train_help_lists_the_flags_and_points_at_config_show():
    text = invoke("train", "--help").output
    for flag in ("--env", "--algo", "--seed", "--steps", "--device", "max_timesteps",
                 "rltrain config show"):
        assert flag in text


def test_config_show_prints_every_key_of_the_default_config():
    assert shown() == config_to_dict(TrainConfig())
    td3 = shown("--algo", "td3", "--set", "td3.policy_delay=3")
    leaves = {key for key, _, _ in iter_fields(TrainConfig)}
    flat = set()
    stack = [("", td3)]
    while stack:  # every leaf key of the printed YAML, dotted
        prefix, node = stack.pop()
        for name, value in node.items():
            if isinstance(value, dict) and prefix + name not in leaves:  # not env_kwargs
                stack.append((f"{prefix}{name}.", value))
            else:
                flat.add(prefix + name)
    # every key but the other algorithms' own sections (shown only with their algo)
    others = {k for k in leaves if k.split(".")[0] in ("sac", "crossq", "tqc")}
    assert flat == leaves - others and td3["td3"]["policy_delay"] == 3


def test_config_show_of_a_file_is_what_train_would_load(tmp_path):
    config = str(write_config(tmp_path, gamma=0.95))
    expected = config_to_dict(load_config(config, ["tau=0.01"]))
    assert shown("--config", config, "--set", "tau=0.01") == expected
    assert expected["gamma"] == 0.95 and expected["batch_size"] == 32
    assert shown("--config", "pendulum_td3.yaml")["algo"] == "td3"  # shipped by name
    missing = invoke("config", "show", "--config", str(tmp_path / "none.yaml"))
    assert missing.exit_code == 2 and "not found" in missing.output
