"""The RLlib callback on RLlib's PPO and DQN (new API stack) in CartPole-v1's Discrete
action space: short healthy runs (docs/examples/rllib_ppo.py's PPO; a DQN) write the
run folder, the state-action map of the two actions and the learners' reports as the
metrics the PPO and DQN rules read, and `rltrain diagnose` reads them with no warning;
`rltrain pause` stops PPO at the end of an iteration and the printed lines continue the
run. Without a run: those rules judging RLlib's own configs, their fixes in RLlib's
settings, PPO's step measured, what is refused."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from gymnasium import spaces

from rltrain.integrations.rllib_keys import RLlibKeys
from rltrain.integrations.rllib_models import check_spaces
from rltrain.integrations.rllib_settings import rllib_config
from rltrain.integrations.rllib_value_view import dqn_metrics, policy_step, ppo_metrics
from rltrain.integrations.session import session_config
from rltrain.scripts.cli import cli
from rltrain.utils.diagnosis.rules.on_policy_rules import PolicyStepSize
from rltrain.utils.diagnosis.rules.q_learning_rules import ExplorationSchedule
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.hooks.hook import EpisodeEnd, Update
from rltrain.utils.run.log_files import read_jsonl

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib")

from ray.rllib.algorithms.algorithm import Algorithm  # noqa: E402
from ray.rllib.algorithms.dqn import DQNConfig  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from test_rllib_callback import local_ray, tensorboard_scalars  # noqa: E402, F401

from rltrain.integrations.rllib import rltrain_callback  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "rllib_ppo.py"
# 256 env steps per iteration, trained on in 4 epochs of 64-step minibatches
TINY = ["--batch-size", "256", "--minibatch-size", "64", "--epochs", "4", "--hidden", "16"]
PPO_STEPS = 1536  # six iterations: policy_step_size judges the newest five
# Loss lines every iteration, the state-action map at 1024 env steps, gradient records
# every few updates, the Q measurement every 40 updates.
WATCH = {"log_freq": 256, "diagnostics": {"heatmap_freq": 1024, "window_size": 1,
                                          "grad_freq": 5,
                                          "q_beyond_returns": {"every_updates": 40}}}
# A few hundred env steps per DQN iteration, an update per 4 after the first 200
DQN_STEPS = 1000
LN2 = math.log(2)


@pytest.fixture(scope="module")
def example(local_ray):  # noqa: F811 (the fixture)
    spec = importlib.util.spec_from_file_location("rllib_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RLTRAIN = WATCH
    return module


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory, example):
    """The docs' example, 1536 env steps: its log folder."""
    folder = tmp_path_factory.mktemp("rllib_ppo")
    code = example.main([*TINY, "--total-timesteps", str(PPO_STEPS),
                         "--log-dir", str(folder / "logs"),
                         "--checkpoint-dir", str(folder / "checkpoints")])
    assert code == 0
    return folder / "logs" / "rllib_ppo"


def dqn_config(run_name: str, log_dir: Path) -> DQNConfig:
    return (DQNConfig()
            .environment("CartPole-v1")
            .env_runners(num_env_runners=0, rollout_fragment_length=16)
            .training(num_steps_sampled_before_learning_starts=200,
                      train_batch_size_per_learner=32, training_intensity=8,
                      epsilon=[(0, 1.0), (600, 0.05)], target_network_update_freq=100)
            .rl_module(model_config={"fcnet_hiddens": [32]})
            .reporting(min_sample_timesteps_per_iteration=200, min_time_s_per_iteration=0)
            .debugging(seed=0)
            .callbacks(rltrain_callback(run_name=run_name, log_dir=str(log_dir),
                                        checkpoint_dir=str(log_dir.parent / "checkpoints"),
                                        max_timesteps=DQN_STEPS, config=WATCH)))


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory, local_ray):  # noqa: F811 (the fixture)
    """A DQN run of 1000 env steps: its log folder and RLlib's last result."""
    folder = tmp_path_factory.mktemp("rllib_dqn")
    algo = dqn_config("rllib_dqn", folder / "logs").build_algo()
    while not (result := algo.train())["rltrain"]["should_stop"]:
        pass
    algo.stop()
    return folder / "logs" / "rllib_dqn", result


def diagnose(log_dir: Path, monkeypatch) -> tuple[dict, str]:
    monkeypatch.chdir(log_dir.parent.parent)
    as_json = CliRunner().invoke(cli, ["diagnose", log_dir.name, "--json"])
    table = CliRunner().invoke(cli, ["diagnose", log_dir.name])
    assert as_json.exit_code == 0 and table.exit_code == 0, as_json.output + table.output
    return json.loads(as_json.output), " ".join(table.output.split())


def logged(log_dir: Path, tag: str) -> list[float]:
    return [value for _, value in tensorboard_scalars(log_dir)[tag]]


# ------------------------------------------------------------------------ PPO
def test_a_short_ppo_run_writes_the_run_folder_with_the_on_policy_metrics(ppo_run):
    status = json.loads((ppo_run / "status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("finished", PPO_STEPS)
    assert status["integration"] == f"ray.rllib {ray.__version__} PPO"
    # 4 epochs of each 256-step rollout (and RLlib's one added step per episode) in
    # minibatches of 64: 16 to 20 updates an iteration
    assert 6 * 16 <= status["updates"] <= 6 * 20
    episodes = [m for m in read_jsonl(ppo_run / "metrics.jsonl") if m["kind"] == "episode"]
    assert episodes and sum(e["length"] for e in episodes) <= PPO_STEPS
    assert all(e["episode_return"] == e["length"] for e in episodes)  # CartPole's 1 a step
    # RLlib's report under the names the rules read: the entropy of a 2-action policy
    # (as SB3's entropy loss), its value fit, the step measured on each iteration
    assert all(-LN2 - 1e-6 <= x < 0 for x in logged(ppo_run, "train/entropy_loss"))
    assert all(x <= 1 for x in logged(ppo_run, "train/explained_variance"))
    assert all(x > 0 for x in logged(ppo_run, "train/critic_loss"))
    assert all(0 <= x <= 1 for x in logged(ppo_run, "train/clip_fraction"))
    assert all(x >= 0 for x in logged(ppo_run, "train/approx_kl"))
    assert len(logged(ppo_run, "train/curr_kl_coeff")) == 6  # RLlib's own name
    judged = [r for r in read_jsonl(ppo_run / "flow1.jsonl")
              if r.get("rule") == "policy_step_size"]
    assert [r["env_steps"] for r in judged] == [1280, 1536]  # the fifth rollout on
    gradients = [r for r in read_jsonl(ppo_run / "flow1.jsonl") if r["kind"] == "gradients"]
    assert {"actor_encoder.net.mlp.0.weight", "pi.net.mlp.0.weight"} <= set(
        gradients[-1]["actor"])
    assert {"critic_encoder.net.mlp.0.weight", "vf.net.mlp.0.weight"} <= set(
        gradients[-1]["critic"])


def test_config_yaml_records_ppos_settings_in_rllibs_names_and_the_rules(ppo_run):
    config = yaml.safe_load((ppo_run / "config.yaml").read_text())
    assert (config["algo"], config["batch_size"], config["learning_starts"]) == ("ppo", 64, 0)
    actor = config["networks"]["actor"]  # RLlib's default activation: tanh
    assert (actor["hidden_sizes"], actor["activation"]) == ([16, 16], "tanh")
    library = config["library"]
    assert (library["algorithm"], library["minibatch_size"], library["num_epochs"],
            library["clip_param"], library["train_batch_size_per_learner"]) == (
        "PPO", 64, 4, 0.2, 256)
    # what the rules read, under their names
    assert (library["n_epochs"], library["clip_range"], library["ent_coef"],
            library["vf_coef"], library["n_steps"]) == (4, 0.2, 0.0, 1.0, 256)
    assert config["gamma"] == 0.98


@pytest.mark.parametrize("run", ["ppo_run", "dqn_run"])
def test_the_state_action_map_counts_each_discrete_action_per_cluster(run, request):
    log_dir = request.getfixturevalue(run)
    log_dir = log_dir[0] if isinstance(log_dir, tuple) else log_dir
    assert (log_dir / "heatmaps" / "heatmap_step_1024.png").is_file()
    written = list((log_dir / "heatmaps").glob("clusters_step_*.json"))
    assert written
    for clusters in written:
        found = json.loads(clusters.read_text())["clusters"]
        rows = [c["action_probs"] for c in found.values() if c["samples"]]
        # CartPole's two actions: one bin each, a share of the cluster's samples
        assert rows and all(len(row) == 1 and len(row[0]) == 2 for row in rows)
        assert all(sum(row[0]) == pytest.approx(1.0, abs=0.01) for row in rows)
        assert sum(c["samples"] for c in found.values()) >= 200
    heatmaps = [d for d in read_jsonl(log_dir / "flow1.jsonl") if d["kind"] == "heatmap"]
    assert heatmaps and all(d["action_saturation"] is None for d in heatmaps)


@pytest.mark.parametrize("run, algo", [("ppo_run", "ppo"), ("dqn_run", "dqn")])
def test_rltrain_diagnose_reads_the_run_with_no_warning(run, algo, request, monkeypatch):
    log_dir = request.getfixturevalue(run)
    log_dir = log_dir[0] if isinstance(log_dir, tuple) else log_dir
    report, table = diagnose(log_dir, monkeypatch)
    assert [f["rule"] for f in report["findings"] if f["severity"] != "info"] == []
    assert "q_overestimation" in report["not_judged_for"]["rules"]
    assert f"not judged for algo {algo} (" in table
    assert (log_dir / "report.html").is_file()


def test_rltrain_pause_stops_ppo_after_an_iteration_and_the_printed_lines_continue(
        tmp_path, example, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = example.parse([*TINY, "--total-timesteps", "1024", "--run-name", "p"])
    algo = example.ppo_config(args).build_algo()
    assert algo.train()["rltrain"]["state"] == "running"
    asked = CliRunner().invoke(cli, ["pause", "p", "--no-wait", "--reason", "checking"])
    assert asked.exit_code == 0, asked.output
    # the request is taken when the iteration under way has trained on its rollout
    watch = algo.train()["rltrain"]
    trained = {k: v.clone() for k, v in algo.learner_group._learner.module[
        "default_policy"].state_dict().items()}
    algo.stop()
    assert (watch["should_stop"], watch["state"], watch["env_steps"]) == (True, "paused", 512)
    assert Path(watch["checkpoint"]) == Path("checkpoints/p/paused_at_step_512")
    status = json.loads(Path("logs/p/status.json").read_text())
    assert (status["state"], status["pause_reason"]) == ("paused", "[outside_request] checking")
    paused_updates = status["updates"]
    printed = capsys.readouterr().out
    assert status["continue_with"] in printed
    lines = [line.strip() for line in printed.splitlines()
             if line.startswith(("    algo = ", "    result = "))]
    assert [line.split(" = ")[0] for line in lines] == ["algo", "result"]
    namespace = {"Algorithm": Algorithm}
    exec(lines[0], namespace)  # noqa: S102 (the printed lines, as they are)
    again = namespace["algo"]
    # the saved weights are those the paused iteration's updates left
    restored = again.learner_group._learner.module["default_policy"].state_dict()
    assert trained.keys() == restored.keys()
    assert all(torch.equal(trained[k], restored[k]) for k in trained)
    exec(lines[1], namespace)  # noqa: S102
    result = namespace["result"]
    assert (result["rltrain"]["state"], result["rltrain"]["env_steps"]) == ("running", 768)
    while not again.train()["rltrain"]["should_stop"]:
        pass
    again.stop()
    status = json.loads(Path("logs/p/status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("finished", 1024)
    assert status["updates"] >= paused_updates + 2 * 16
    events = read_jsonl(Path("logs/p/events.jsonl"))
    assert [e["action"] for e in events if e["rule"] == "outside_request"] == [
        "pause", "paused"]
    assert [e["env_steps"] for e in events if e["rule"] == "resume"] == [512]


# ------------------------------------------------------------------------ DQN
def test_a_short_dqn_run_writes_the_run_folder_with_its_epsilon_and_q(dqn_run):
    log_dir, result = dqn_run
    sampled = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
    trained = int(result["learners"]["default_policy"]["num_module_steps_trained_lifetime"])
    status = json.loads((log_dir / "status.json").read_text())
    assert (status["state"], status["env_steps"]) == ("finished", sampled)
    assert sampled >= DQN_STEPS
    assert status["integration"] == f"ray.rllib {ray.__version__} DQN"
    assert status["updates"] == trained // 32  # RLlib's trained steps over the batch
    # the epsilon RLlib's env runner explored with: from 1 down to the schedule's 0.05
    epsilon = logged(log_dir, "train/exploration_rate")
    assert epsilon == sorted(epsilon, reverse=True) and epsilon[0] > 0.5
    assert epsilon[-1] == pytest.approx(0.05)
    assert logged(log_dir, "train/q_mean") and logged(log_dir, "train/critic_loss")
    flow1 = read_jsonl(log_dir / "flow1.jsonl")
    assert [r for r in flow1 if r["kind"] == "q_values"]  # the Q network measured
    gradients = [r for r in flow1 if r["kind"] == "gradients"]
    assert gradients[-1]["actor"] == {}  # a greedy choice: no network of its own
    assert {"encoder.net.mlp.0.weight", "af.net.mlp.0.weight", "vf.net.mlp.0.weight"} <= set(
        gradients[-1]["critic"])
    config = yaml.safe_load((log_dir / "config.yaml").read_text())
    assert (config["algo"], config["batch_size"], config["learning_starts"], config["tau"]) \
        == ("dqn", 32, 200, 1.0)
    library = config["library"]
    assert (library["algorithm"], library["epsilon"], library["target_network_update_freq"]) \
        == ("DQN", [[0, 1.0], [600, 0.05]], 100)
    assert (library["exploration_initial_eps"], library["exploration_final_eps"],
            library["exploration_fraction"], library["target_update_interval"]) == (
        1.0, 0.05, 0.6, 100)


# ------------------------------------------------------ without a run of RLlib
def rule_context(tmp_path: Path, config: object, name: str) -> RuleContext:
    derived = rllib_config(config, name, "CartPole-v1", 50_000)
    train = session_config({}, {**derived, "log_dir": str(tmp_path)})
    view = AgentView(actor=None, critic=None, q_value=None, act=None, probe=None,
                     updates=lambda: 0, networks=dict, action_low=np.array([-0.5]),
                     action_high=np.array([1.5]), device=None, discrete_actions=2)
    return RuleContext(train, 4, 1, view)


@pytest.mark.parametrize("training, restated", [
    ({"num_epochs": 100}, {"num_epochs": 10}),
    ({"clip_param": 0.6}, {"clip_param": 0.2}),
    ({"lr": 1e-3}, {"lr": 3e-4}),
])
def test_policy_step_size_judges_an_rllib_ppo_and_its_fix_is_in_rllibs_names(
        tmp_path, training, restated):
    config = PPOConfig().environment("CartPole-v1").training(**training)
    context = rule_context(tmp_path, config, "PPO")
    rule = PolicyStepSize(context)
    found = []
    for k in range(1, 6):  # five iterations' reports, as the callback hands them on
        found += rule.on_update(Update(k * 4000, k, {"approx_kl": 0.3, "clip_fraction": 0.6}))
    assert len(found) == 1
    keys = RLlibKeys("PPO", context.config.batch_size, context.config.max_timesteps,
                     context.config.library)
    fixed = keys.finding(found[0])
    assert fixed.suggested_set == restated
    change = ", ".join(f"{k}={v!r}" for k, v in restated.items())
    assert fixed.message.endswith(f"(in RLlib: {change})")


def test_exploration_schedule_judges_an_rllib_dqn_and_proposes_its_epsilon(tmp_path):
    config = DQNConfig().environment("CartPole-v1").training(
        epsilon=[(0, 1.0), (40, 0.0)], num_steps_sampled_before_learning_starts=1000)
    context = rule_context(tmp_path, config, "DQN")
    rule = ExplorationSchedule(context)
    noise = np.random.default_rng(0).normal(0, 5, 800)
    found, steps = [], 0
    for k, value in enumerate(20 + noise):  # the return never moves
        steps += 20
        found += rule.on_update(Update(steps, steps // 4,
                                       {"exploration_rate": max(0.0, 1 - steps / 40)}))
        found += rule.on_episode_end(EpisodeEnd(steps, 0, k, float(value), 20, True, 0))
    assert len(found) == 1
    # SB3's exploration_fraction 0.1 of the 50,000 steps and a final epsilon of 0.05
    keys = RLlibKeys("DQN", 32, 50_000, context.config.library)
    assert keys.finding(found[0]).suggested_set == {"epsilon": [[0, 1.0], [5000, 0.05]]}


def test_rllibs_ppo_and_dqn_settings_as_rltrain_keys():
    ppo = (PPOConfig().environment("CartPole-v1")
           .env_runners(num_env_runners=2)
           .training(lr=[[0, 1e-3], [1000, 1e-4]], entropy_coeff=0.01, num_epochs=8,
                     minibatch_size=64, train_batch_size_per_learner=512))
    derived = rllib_config(ppo, "PPO", "CartPole-v1", 10_000)
    assert (derived["algo"], derived["actor_lr"], derived["batch_size"],
            derived["replay_buffer_size"], derived["num_envs"], derived["max_timesteps"]) == (
        "ppo", 1e-3, 64, 512, 2, 10_000)
    library = derived["library"]
    assert library["learning_rate"] == {"schedule": [[0, 1e-3], [1000, 1e-4]], "start": 1e-3}
    assert (library["ent_coef"], library["n_epochs"], library["n_steps"]) == (0.01, 8, 256)
    dqn = DQNConfig().environment("CartPole-v1").training(
        epsilon=0.1, training_intensity=64, train_batch_size_per_learner=32,
        replay_buffer_config={"capacity": 5000})
    derived = rllib_config(dqn, "DQN", "CartPole-v1", 10_000)
    assert (derived["algo"], derived["utd_ratio"], derived["replay_buffer_size"],
            derived["networks"]["actor"]) == ("dqn", 2, 5000, {"hidden_sizes": None})
    assert (derived["library"]["exploration_final_eps"],
            derived["library"]["exploration_fraction"]) == (0.1, 0.0)


@pytest.mark.parametrize("algorithm, suggested, restated, missing", [
    ("PPO", {"ent_coef": 0.01, "vf_coef": 0.5, "learning_rate": 3e-4},
     {"lr": 3e-4, "entropy_coeff": 0.01, "vf_loss_coeff": 0.5}, []),
    ("PPO", {"critic_lr": 1e-4, "batch_size": 32, "normalize.rewards": True,
             "replay_buffer_size": 10},
     {"lr": 1e-4, "minibatch_size": 32}, ["normalize.rewards", "replay_buffer_size"]),
    ("DQN", {"target_update_interval": 1000, "utd_ratio": 2, "learning_rate": 1e-4},
     {"lr": 1e-4, "target_network_update_freq": 1000, "training_intensity": 64.0}, []),
])
def test_a_rules_fix_is_restated_in_rllibs_settings(algorithm, suggested, restated,
                                                     missing):
    assert RLlibKeys(algorithm, 32).translate(suggested) == (restated, missing)


def test_ppos_step_is_the_ratio_of_the_updated_policy_to_the_sampling_one():
    sampled = np.log(np.array([0.5, 0.5, 0.5, 0.5], np.float32))
    # the updated policy's probabilities: ratios 2, 1, 0.5 and 1
    updated = torch.log(torch.tensor([1.0, 0.5, 0.25, 0.5]))
    step = policy_step(lambda obs, actions: updated, np.zeros((4, 4)), np.zeros((4, 1)),
                       sampled, clip=0.3, device=torch.device("cpu"))
    # SB3's approximate KL, mean((r - 1) - log r); two of four ratios outside 1 +- 0.3
    kl = ((1 - LN2) + (-0.5 + LN2)) / 4
    assert step == {"approx_kl": pytest.approx(kl), "clip_fraction": 0.5}


def test_the_learners_reports_become_the_metrics_the_rules_read():
    ppo = {"policy_loss": 0.2, "vf_loss": 9.9, "vf_loss_unclipped": 130.0,
           "vf_explained_var": 0.1, "entropy": 0.69, "mean_kl_loss": 0.01,
           "curr_kl_coeff": 0.2, "default_optimizer_learning_rate": 3e-4,
           "num_module_steps_trained": 1088}
    assert ppo_metrics(ppo) == {
        "actor_loss": 0.2, "critic_loss": 130.0, "explained_variance": 0.1,
        "learning_rate": 3e-4, "entropy_loss": -0.69, "vf_loss": 9.9, "mean_kl_loss": 0.01,
        "curr_kl_coeff": 0.2}
    dqn = {"qf_loss": 0.4, "qf_mean": 2.0, "td_error_mean": 0.9,
           "gradients_default_optimizer_global_norm": 1.5}
    assert dqn_metrics(dqn, 0.3) == {
        "critic_loss": 0.4, "q_mean": 2.0, "td_error_mean": 0.9, "exploration_rate": 0.3,
        "gradients_default_optimizer_global_norm": 1.5}


@pytest.mark.parametrize("name, action_space, named", [
    ("PPO", spaces.Box(-1.0, 1.0, (1,)), "RLlib's PPO in a Discrete action space, not Box("),
    ("DQN", spaces.MultiDiscrete([3, 3]), "RLlib's DQN in a Discrete action space, not Multi"),
    ("SAC", spaces.Discrete(2), "RLlib's SAC in a 1-D Box action space, not Discrete(2)"),
])
def test_an_action_space_it_does_not_watch_is_refused_in_one_line(name, action_space, named):
    observations = spaces.Box(-1.0, 1.0, (4,))
    with pytest.raises(ConfigError, match=re.escape(named)):
        check_spaces(name, observations, action_space)


def test_ppo_in_a_box_action_space_is_refused_when_built(local_ray, tmp_path,  # noqa: F811
                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = PPOConfig().environment("Pendulum-v1").env_runners(num_env_runners=0).callbacks(
        rltrain_callback(run_name="box"))
    with pytest.raises(ConfigError, match="PPO in a Discrete action space, not Box"):
        config.build_algo()
    assert not Path("logs/box").exists()
