"""A config with several problems names all of them in one run of a command: one line
each, the env id's first, the others in the order the config gives its keys, then the
checks across keys. A problem that makes a later check meaningless skips it. The same
from `rltrain train`, `config show` (which checks no env id: it imports no Gymnasium),
the Python API and a sweep's plan. No training runs here."""

from __future__ import annotations

import pickle

import pytest
from click.testing import CliRunner

import rltrain
from rltrain.scripts.cli import cli
from rltrain.scripts.sweep.sweep_plan import plan_trials, trial_config
from rltrain.utils.config.loader import apply_overrides, config_from_dict, load_config
from rltrain.utils.errors import ConfigError, EnvError, UserError

UNKNOWN_ENV = ("unknown environment id 'Pendulm-v1'; closest registered ids: Pendulum-v1")
NO_UPDATE = ("config key 'learning_starts' (1000) must be below max_timesteps (100): "
             "no update would run")


def problems_of(call, *args, **kwargs) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        call(*args, **kwargs)
    return caught.value.problems


def test_every_independent_problem_is_named_in_the_config_s_order():
    raw = {"gama": 0.9, "seed": -1, "batch_size": 512, "replay_buffer_size": 100,
           "monitor": {"q_explosion": {"threshold": -1}, "nonsense": 1},
           "run_name": "../escape"}
    assert problems_of(config_from_dict, raw) == [
        "unknown config key 'gama'; did you mean 'gamma'?",
        "config key 'seed' must be an integer >= 0; got -1",
        "unknown config key 'monitor.nonsense' in section 'monitor'",
        "config key 'batch_size' (512) must not exceed replay_buffer_size (100)",
        "config key 'monitor.q_explosion.threshold' must be a number > 0 "
        "(or set monitor.q_explosion.action: off)",
        "config key 'run_name' must be a plain folder name (letters, digits, '-', '_', '.'); "
        "got '../escape'",
    ]


@pytest.mark.parametrize("raw, only", [
    ({"max_timesteps": "abc", "learning_starts": 5000},
     "config key 'max_timesteps' must be an integer >= 1; got 'abc'"),
    ({"batch_size": "big", "replay_buffer_size": 10},
     "config key 'batch_size' must be an integer >= 1; got 'big'"),
    ({"algo": "trpo", "exploration_noise": 0.3, "sac": {"ent_coef": 0.1}},
     "config key 'algo' must be one of ddpg, td3, sac, crossq, tqc, ppo, a2c, dqn; got "
     "'trpo'"),
    ({"monitor": 5}, "config section 'monitor' must be a mapping, got 5 (int)"),
])
def test_a_bad_value_skips_the_checks_that_read_it(raw, only):
    assert problems_of(config_from_dict, raw) == [only]


def test_overrides_that_cannot_apply_are_named_with_the_config_s_problems():
    problems = problems_of(load_config, "pendulum_ddpg.yaml",
                           ["gamma", "seed.x=3", "tau=[1", "max_timesteps=100", "gamma=2"])
    assert problems == [
        "--set expects key=value, got 'gamma'",
        "--set seed.x: 'seed' is not a section",
        "--set tau: cannot parse value '[1' as YAML",
        "config key 'gamma' must be a number in (0, 1]; got 2",
        NO_UPDATE,
    ]
    assert problems_of(apply_overrides, {}, ["a", "b=[", "c=1"], option="--grid") == [
        "--grid expects key=value, got 'a'", "--grid b: cannot parse value '[' as YAML"]


def test_several_problems_are_one_config_error_that_survives_pickling():
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"gamma": 2, "tau": 2})
    error = caught.value
    assert isinstance(error, UserError) and len(str(error).splitlines()) == 2
    copy = pickle.loads(pickle.dumps(error))  # a sweep's trial hands it across processes
    assert type(copy) is ConfigError and copy.problems == error.problems
    assert ConfigError("one line").problems == ["one line"]


def test_train_names_the_env_id_first_then_the_rest_and_makes_no_folder(tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["train", "--config", "pendulum_ddpg.yaml",
                                      "--env", "Pendulm-v1", "--steps", "100",
                                      "--set", "gamma=2"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is not None
    lines = result.output.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("Error: ") for line in lines), lines
    assert lines[0].startswith("Error: " + UNKNOWN_ENV)
    assert lines[1:] == ["Error: config key 'gamma' must be a number in (0, 1]; got 2",
                         "Error: " + NO_UPDATE]
    assert list(tmp_path.iterdir()) == []


def test_config_show_names_every_problem_but_checks_no_env_id():
    result = CliRunner().invoke(cli, ["config", "show", "--config", "pendulum_ddpg.yaml",
                                      "--env", "Pendulm-v1", "--steps", "100",
                                      "--set", "gamma=2"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: config key 'gamma' must be a number in (0, 1]; got 2", "Error: " + NO_UPDATE]


def test_the_api_and_the_sweep_name_the_same_problems_as_train(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    keywords = {"env_name": "Pendulm-v1", "max_timesteps": 100}
    from_api = problems_of(rltrain.train, "pendulum_ddpg.yaml", **keywords)
    sets = ["env_name=Pendulm-v1", "max_timesteps=100"]
    from_sweep = problems_of(plan_trials, "pendulum_ddpg.yaml", tuple(sets), (), 1, "s")
    assert from_api == from_sweep == problems_of(trial_config, "pendulum_ddpg.yaml", sets,
                                                 check_env=True)
    assert from_api[0].startswith(UNKNOWN_ENV) and from_api[1:] == [NO_UPDATE]
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_env_alone_is_still_an_env_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EnvError, match=UNKNOWN_ENV):
        rltrain.train("pendulum_ddpg.yaml", env_name="Pendulm-v1")
    result = CliRunner().invoke(cli, ["train", "--env", "Pendulm-v1"])
    assert result.exit_code == 2 and result.output.count("Error: ") == 1, result.output
    assert UNKNOWN_ENV in result.output and list(tmp_path.iterdir()) == []


def test_an_env_name_of_the_wrong_type_is_not_looked_up(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert problems_of(rltrain.train, "pendulum_ddpg.yaml", env_name=[1, 2],
                       max_timesteps=100) == [
        "config key 'env_name' must be a non-empty string; got [1, 2] (list)", NO_UPDATE]


def test_a_per_env_file_without_the_misspelt_env_names_the_env_id_first(tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "td3.yml").write_text("Pendulum-v1:\n  n_timesteps: 5000\n")
    result = CliRunner().invoke(cli, ["train", "--config", "td3.yml", "--env", "Pendulm-v1"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 2, result.output
    assert lines[0].startswith("Error: " + UNKNOWN_ENV)
    assert lines[1].startswith("Error: config 'td3.yml' has no entry for env 'Pendulm-v1'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["td3.yml"]


def test_a_run_name_longer_than_a_folder_name_can_be_is_bad_input_not_a_write_failure(
        tmp_path, monkeypatch):
    """Over 255 bytes it was exit 4 ("cannot create the run folder"), as if the disk
    had failed; the name is the user's input: exit 2, nothing made."""
    monkeypatch.chdir(tmp_path)
    name = "é" * 128  # 256 bytes in UTF-8, 128 characters
    result = CliRunner().invoke(cli, ["train", "--env", "Pendulum-v1", "--run-name", name])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        "Error: config key 'run_name' is 256 bytes long; a folder name has at most 255 (the "
        "file system's limit)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sets, says", [
    (["num_envs=100000"], "config key 'num_envs' is 100000; at most 4096 envs step in one "
                          "process"),
    (["num_envs=100", "vector_mode=async"], "config key 'num_envs' is 100 with vector_mode "
                                            "async, a process each"),
    (["num_workers=500"], "config key 'num_workers' is 500, each runner a process on this "
                          "machine's"),
])
def test_envs_and_runners_beyond_what_the_machine_can_start_are_refused(monkeypatch, sets,
                                                                         says):
    """num_envs 100000 or --workers 500 hung at the start, leaving Ray's processes behind."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    args = [part for item in sets for part in ("--set", item)]
    result = CliRunner().invoke(cli, ["config", "show", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output and len(result.output.strip().splitlines()) == 1
    joined = CliRunner().invoke(cli, ["config", "show", "--set", "num_workers=500", "--set",
                                      "ray_address=ray://head:10001"])
    assert joined.exit_code == 0  # a cluster's own size is Ray's to know
