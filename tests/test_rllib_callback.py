"""The RLlib callback: RLlib's SAC (new API stack) on Pendulum-v1 for a few hundred env
steps writes rltrain's run folder that `rltrain diagnose` reads; `rltrain pause` saves an
RLlib checkpoint that restores and continues the run; refusals in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from click.testing import CliRunner

import rltrain
from rltrain.integrations.rllib_keys import RLlibKeys
from rltrain.scripts.cli import cli
from rltrain.scripts.workers.ray_start import init_ray
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.log_files import read_jsonl

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib")

from ray.rllib.algorithms.algorithm import Algorithm  # noqa: E402

from rltrain.integrations.rllib import (  # noqa: E402
    check_algorithm,
    finish,
    learner_metrics,
    rltrain_callback,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "rllib_sac.py"
# A few hundred env steps: 100 per iteration, one update per 4 env steps after 50.
TINY = ["--learning-starts", "50", "--batch-size", "16", "--hidden", "16",
        "--training-intensity", "4"]
# Loss lines every 100 env steps, a heatmap at 400 (the state-action map needs 200 steps
# of ended episodes after the warm-up), reward statistics after each episode.
WATCH = {"log_freq": 100, "diagnostics": {"heatmap_freq": 400, "window_size": 1}}


def tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}


@pytest.fixture(scope="module")
def local_ray():
    # A remote env runner's process imports rltrain (the callback's base class) as the
    # tests do.
    path = os.pathsep.join([str(Path(rltrain.__file__).parents[1]),
                            os.environ.get("PYTHONPATH", "")])
    init_ray(ray, num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})  # retried on a loaded machine
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def example(local_ray):
    spec = importlib.util.spec_from_file_location("rllib_sac", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RLTRAIN = WATCH
    return module


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, example):
    """The docs' example, 400 env steps: its log folder."""
    folder = tmp_path_factory.mktemp("rllib")
    code = example.main([*TINY, "--total-timesteps", "400", "--log-dir", str(folder / "logs"),
                         "--checkpoint-dir", str(folder / "checkpoints")])
    assert code == 0
    return folder / "logs" / "rllib_sac"


def test_the_example_writes_the_run_folder_with_episodes_and_learner_metrics(finished_run):
    status = json.loads((finished_run / "status.json").read_text())
    assert (status["state"], status["env_steps"], status["episodes"]) == ("finished", 400, 2)
    assert status["integration"].startswith(f"ray.rllib {ray.__version__} SAC")
    # one update per 4 env steps once 50 were sampled, counted from RLlib's report
    assert 75 <= status["updates"] <= 100
    metrics = read_jsonl(finished_run / "metrics.jsonl")
    episodes = [m for m in metrics if m["kind"] == "episode"]
    assert [(e["env_steps"], e["length"]) for e in episodes] == [(200, 200), (400, 200)]
    # Pendulum's rewards are in [-16.3, 0]: 200 of them
    assert all(-3300 < e["episode_return"] < 0 for e in episodes)
    scalars = tensorboard_scalars(finished_run)
    for tag in ("train/critic_loss", "train/actor_loss", "train/q_mean", "train/entropy",
                "train/ent_coef", "train/critic_grad_norm", "train/actor_grad_norm"):
        assert [step for step, _ in scalars[tag]] == [100, 200, 300, 400][-len(scalars[tag]):]
    assert scalars["train/critic_grad_norm"][-1][1] > 0
    assert scalars["train/ent_coef"][-1][1] < 1.0  # RLlib's alpha, learnt from 1.0


def test_config_yaml_records_rllibs_settings_in_rllibs_names(finished_run):
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    assert (config["algo"], config["batch_size"], config["learning_starts"]) == ("sac", 16, 50)
    library = config["library"]
    assert library["algorithm"] == "SAC"
    assert library["train_batch_size_per_learner"] == 16
    assert library["num_steps_sampled_before_learning_starts"] == 50
    assert library["training_intensity"] == 4
    assert library["model_config"]["fcnet_hiddens"] == [16, 16]
    assert config["networks"]["actor"]["hidden_sizes"] == [16, 16]


def test_the_state_action_map_and_reward_statistics_are_recorded(finished_run):
    assert (finished_run / "heatmaps" / "heatmap_step_400.png").is_file()
    records = read_jsonl(finished_run / "flow1.jsonl")
    kinds = {r["kind"] for r in records}
    assert "reward" in kinds, kinds
    reward = [r for r in records if r["kind"] == "reward"][-1]
    assert reward["mean"] < 0  # Pendulum's rewards, as the env gave them


def test_rltrain_diagnose_reads_the_run(finished_run, monkeypatch):
    monkeypatch.chdir(finished_run.parent.parent)
    shown = CliRunner().invoke(cli, ["diagnose", "rllib_sac"])
    assert shown.exit_code == 0, shown.output
    assert "rllib_sac" in shown.output
    as_json = CliRunner().invoke(cli, ["diagnose", "rllib_sac", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert (finished_run / "report.html").is_file()


def test_rltrain_pause_saves_a_checkpoint_that_restores_and_continues(tmp_path, example,
                                                                     monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = example.parse([*TINY, "--total-timesteps", "400", "--run-name", "p"])
    algo = example.sac_config(args).build_algo()
    assert algo.train()["rltrain"]["should_stop"] is False
    asked = CliRunner().invoke(cli, ["pause", "p", "--no-wait", "--reason", "checking"])
    assert asked.exit_code == 0, asked.output
    watch = algo.train()["rltrain"]
    algo.stop()
    assert (watch["should_stop"], watch["state"], watch["env_steps"]) == (True, "paused", 200)
    checkpoint = Path(watch["checkpoint"])
    assert checkpoint == Path("checkpoints/p/paused_at_step_200")
    assert (checkpoint / "rllib_checkpoint.json").is_file()
    status = json.loads(Path("logs/p/status.json").read_text())
    assert status["state"] == "paused"
    assert status["pause_reason"] == "[outside_request] checking"
    assert "Algorithm.from_checkpoint(" in status["continue_with"]
    assert "Algorithm.from_checkpoint(" in capsys.readouterr().out
    events = read_jsonl(Path("logs/p/events.jsonl"))
    assert [(e["rule"], e["action"]) for e in events] == [("outside_request", "pause"),
                                                          ("outside_request", "paused")]
    # RLlib's own restore; its config's callback continues the run in its folder.
    again = Algorithm.from_checkpoint(str(checkpoint.resolve()))
    watch = again.train()["rltrain"]
    assert (watch["state"], watch["env_steps"]) == ("running", 300)
    finish(again)
    again.stop()
    status = json.loads(Path("logs/p/status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("finished", 300)
    resumed = [e for e in read_jsonl(Path("logs/p/events.jsonl")) if e["rule"] == "resume"]
    assert [e["env_steps"] for e in resumed] == [200]
    assert "its rules go on" in resumed[0]["message"]  # the watch's state from the pause


def test_rllibs_evaluations_and_gradient_norms_are_recorded(tmp_path, example, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = example.parse([*TINY, "--total-timesteps", "100", "--run-name", "e"])
    config = example.sac_config(args).evaluation(
        evaluation_interval=1, evaluation_duration=1, evaluation_duration_unit="episodes",
    ).reporting(log_gradients=True)
    algo = config.build_algo()
    result = algo.train()
    algo.stop()
    # the evaluation episode's 200 steps are not training steps
    assert (result["rltrain"]["state"], result["rltrain"]["env_steps"]) == ("finished", 100)
    evaluations = [m for m in read_jsonl(Path("logs/e/metrics.jsonl")) if m["kind"] == "eval"]
    assert len(evaluations) == 1
    rllib_mean = result["evaluation"]["env_runners"]["episode_return_mean"]
    assert evaluations[0]["mean_return"] == pytest.approx(rllib_mean)
    status = json.loads(Path("logs/e/status.json").read_text())
    assert status["evaluations"] == 1
    assert (Path("checkpoints/e/best_checkpoint") / "rllib_checkpoint.json").is_file()
    # RLlib's own gradient norms (log_gradients), under RLlib's names
    tags = tensorboard_scalars(Path("logs/e"))
    assert {"train/gradients_qf_global_norm", "train/gradients_policy_global_norm"} <= set(tags)


def test_a_remote_env_runners_steps_are_sent_back_and_judged(tmp_path, example,
                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = example.parse([*TINY, "--total-timesteps", "200", "--run-name", "remote"])
    algo = example.sac_config(args).env_runners(num_env_runners=1).build_algo()
    while not (result := algo.train())["rltrain"]["should_stop"]:
        pass
    algo.stop()
    sampled = result["env_runners"]["num_env_steps_sampled_lifetime"]
    status = json.loads(Path("logs/remote/status.json").read_text())
    assert (status["state"], status["env_steps"], status["episodes"]) == (
        "finished", sampled, 1)
    episodes = [m for m in read_jsonl(Path("logs/remote/metrics.jsonl"))
                if m["kind"] == "episode"]
    assert [(e["env_steps"], e["length"]) for e in episodes] == [(200, 200)]
    config = yaml.safe_load(Path("logs/remote/config.yaml").read_text())
    assert (config["num_envs"], config["library"]["num_env_runners"]) == (1, 1)


def test_rltrain_resume_on_an_rllib_checkpoint_says_what_to_do(tmp_path):
    folder = tmp_path / "checkpoints" / "r" / "paused_at_step_200"
    folder.mkdir(parents=True)
    (folder / "rllib_checkpoint.json").write_text("{}")
    (folder / "algorithm_state.pkl").write_bytes(b"")
    for given in (folder, folder / "algorithm_state.pkl"):
        result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(given)])
        assert result.exit_code == 2
        assert f"'{folder}' is an RLlib checkpoint" in result.output
        assert 'Algorithm.from_checkpoint(path), then train(): its config\'s callback ' \
               'continues run "r"' in result.output
        assert "Traceback" not in result.output


def fake_algorithm(name: str = "SAC", runners: int = 0, learners: int = 0,
                   envs: int = 1, lstm: bool = False, agents: int = 1) -> SimpleNamespace:
    config = SimpleNamespace(num_env_runners=runners, num_learners=learners,
                             num_envs_per_env_runner=envs, model_config={"use_lstm": lstm},
                             is_multi_agent=agents > 1)
    kind = type(name, (), {})
    algorithm = kind()
    algorithm.config = config
    algorithm.learner_group = SimpleNamespace(is_local=learners == 0)
    return algorithm


@pytest.mark.parametrize("algorithm, named", [
    (fake_algorithm("APPO"), "watches RLlib's SAC, PPO and DQN, not APPO"),
    (fake_algorithm("PPO", lstm=True), r"model_config=\{'use_lstm': False\}\), not True"),
    (fake_algorithm("DQN", agents=2), r"single-agent algorithm: leave multi_agent\(\) out"),
    (fake_algorithm(learners=1), r"num_learners=0\), not 1"),
    (fake_algorithm(envs=4), r"num_envs_per_env_runner=1\), not 4"),
])
def test_what_it_cannot_watch_is_refused_in_one_line(algorithm, named):
    with pytest.raises(ConfigError, match=named):
        check_algorithm(algorithm)


def test_a_refusal_ends_build_algo_with_the_one_line(example):
    args = example.parse([*TINY, "--run-name", "two_envs"])
    config = example.sac_config(args).env_runners(num_envs_per_env_runner=2)
    with pytest.raises(ConfigError, match=r"num_envs_per_env_runner=1\), not 2"):
        config.build_algo()


def test_the_learners_report_becomes_rltrains_update_metrics():
    report = {"qf_loss": 1.5, "qf_twin_loss": 0.5, "policy_loss": -3.0, "qf_mean": 4.0,
              "alpha_value": 0.2, "logps": -0.7, "gradients_policy_global_norm": 2.0,
              "num_module_steps_trained": 32}
    assert learner_metrics(report) == {
        "critic_loss": 2.0, "actor_loss": -3.0, "q_mean": 4.0, "ent_coef": 0.2,
        "entropy": 0.7, "gradients_policy_global_norm": 2.0}


def test_a_findings_fix_is_restated_in_rllibs_settings():
    finding = Finding(100, "grad_explosion", 1e4, 1e3, "warn", "the critic gradient grew",
                      suggested_set={"critic_lr": 1e-4, "grad_clip_norm": 10.0,
                                     "utd_ratio": 2, "normalize.rewards": True})
    restated = RLlibKeys("SAC", batch_size=64).finding(finding)
    assert restated.suggested_set == {"critic_lr": 1e-4, "grad_clip": 10.0,
                                      "grad_clip_by": "global_norm",
                                      "training_intensity": 128.0}
    assert restated.message == (
        "the critic gradient grew (in RLlib: critic_lr=0.0001, grad_clip=10.0, "
        "grad_clip_by='global_norm', training_intensity=128.0) (normalize.rewards=True: "
        "no RLlib setting does this)")


def test_each_factory_call_makes_its_own_class_and_recorder():
    first, second = rltrain_callback(run_name="a"), rltrain_callback(run_name="b")
    assert first is not second and first.recorder is not second.recorder
    assert first.settings["run_name"] == "a" and second.settings["run_name"] == "b"


def test_without_ray_the_module_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "rltrain.integrations.rllib", raising=False)
    with pytest.raises(ImportError, match=r'pip install "rltrain\[rllib\]"'):
        importlib.import_module("rltrain.integrations.rllib")
