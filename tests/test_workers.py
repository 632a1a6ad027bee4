"""Env runners on Ray (num_workers): lockstep runs resume bit for bit, other worker
counts resume correctly, lost and failing runners are restarted or stop the run."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import yaml
from click.testing import CliRunner
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_resume import assert_same_state, metrics

from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.scripts.workers.env_runner import noise_scale
from rltrain.scripts.workers.ray_start import init_ray
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.run.monitor import TrainingMonitor
from rltrain.utils.run.status import read_status

from conftest import DEVICE, TESTS_DIR, kill_runner, runner_events, tiny_config, tiny_dict

ray = pytest.importorskip("ray")

# Chunks of 7 vector steps: rounds of 14 transitions, so checkpoints every 50 steps fall
# in the middle of a round (and of the runners' episodes).
WORKERS = {"num_workers": 2, "worker_chunk_steps": 7, "worker_sync_every": 20,
           "keep_checkpoints": 100, "checkpoint_freq": 50}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # The runners' processes import the tests' own envs (fake_envs) as the tests do.
    path = os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])
    init_ray(ray, num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})  # retried on a loaded machine
    yield
    ray.shutdown()


def train(tmp_path, name: str, **overrides) -> Trainer:
    config = tiny_config(tmp_path, **{**WORKERS, "run_name": name, **overrides})
    trainer = Trainer(config, DEVICE, interactive=False)
    assert trainer.run(create_run(config)).status == "finished"
    return trainer


def checkpoint(tmp_path, run: str, step: int):
    return load_checkpoint(tmp_path / "checkpoints" / run / f"checkpoint_step_{step}.pt")


def test_the_noise_spreads_geometrically_over_the_runners():
    assert noise_scale(0, 1, 2.0) == 1.0
    assert [noise_scale(i, 3, 2.0) for i in range(3)] == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("overrides", [{}, {"algo": "sac"}, {"algo": "crossq"}])
def test_a_lockstep_fork_from_a_mid_round_checkpoint_is_bit_exact(tmp_path, overrides):
    train(tmp_path, "full", **overrides)
    result = CliRunner().invoke(cli, [
        "resume", "--checkpoint", str(tmp_path / "checkpoints/full/checkpoint_step_150.pt"),
        "--run-name", "fork"])
    assert result.exit_code == 0, result.output
    assert_same_state(checkpoint(tmp_path, "full", 300), checkpoint(tmp_path, "fork", 300))
    full = [x for x in metrics(tmp_path / "logs/full/metrics.jsonl") if x["env_steps"] > 150]
    assert metrics(tmp_path / "logs/fork/metrics.jsonl") == full


def test_a_lockstep_run_paused_and_resumed_with_the_cli_ends_as_an_unpaused_one(
        tmp_path, monkeypatch):
    train(tmp_path, "full")
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(tiny_dict(tmp_path, **{
        k: v for k, v in WORKERS.items() if k != "num_workers"})))
    log_dir = tmp_path / "logs" / "split"
    original = TrainingMonitor.after_step

    def request_pause_at_130(self, env_steps):
        if env_steps == 130:
            (log_dir / "pause.request").write_text("test pause")
        return original(self, env_steps)

    monkeypatch.setattr(TrainingMonitor, "after_step", request_pause_at_130)
    first = CliRunner().invoke(cli, ["train", "--config", str(config_file), "--workers", "2",
                                     "--run-name", "split"])
    assert first.exit_code == 3, first.output
    monkeypatch.setattr(TrainingMonitor, "after_step", original)
    paused = tmp_path / "checkpoints/split/paused_at_step_130.pt"
    assert len(load_checkpoint(paused)["trainer"]["workers"]["runners"]) == 2
    second = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert second.exit_code == 0, second.output
    assert_same_state(checkpoint(tmp_path, "full", 300), checkpoint(tmp_path, "split", 300))


@pytest.mark.parametrize("workers", [1, 0])
def test_a_resume_into_another_number_of_workers_goes_on_and_says_it_is_not_exact(
        tmp_path, workers):
    train(tmp_path, "full", max_timesteps=150)
    result = CliRunner().invoke(cli, [
        "resume", "--checkpoint", str(tmp_path / "checkpoints/full/checkpoint_step_100.pt"),
        "--run-name", "other", "--set", f"num_workers={workers}"])
    assert result.exit_code == 0, result.output
    state = checkpoint(tmp_path, "other", 150)
    assert state["trainer"]["counters"]["env_steps"] == 150
    assert ("workers" in state["trainer"]) == (workers > 0)
    warned = [e["message"] for e in read_jsonl(tmp_path / "logs/other/events.jsonl")
              if e.get("rule") == "resume"]
    assert any("not bit-exact" in m for m in warned), warned


def test_an_async_run_trains_reports_its_runners_and_resumes(tmp_path, monkeypatch):
    # A reading of the pace every log_freq steps, however fast the run; a threshold near 0
    # makes the starvation rule fire on each one: its findings reach events.jsonl.
    monkeypatch.setattr("rltrain.scripts.workers.worker_stats.MIN_WINDOW", 1e-3)
    train(tmp_path, "async", worker_mode="async",
          monitor={"worker_starvation": {"threshold": 0.01, "readings": 1}})
    starved = [e for e in read_jsonl(tmp_path / "logs/async/events.jsonl")
               if e.get("rule") == "worker_starvation"]
    assert starved and all(e["env_steps"] > 100 for e in starved)  # after the warm-up
    assert {e["suggested_set"]["num_workers"] for e in starved} <= {4, 1}
    status = read_status(tmp_path / "logs/async/status.json")
    assert status["env_steps"] == 300 and status["workers"]["mode"] == "async"
    runners = status["workers"]["runners"]
    assert [r["runner"] for r in runners] == [0, 1]
    assert all(r["env_steps_per_s"] > 0 and r["memory_mb"] > 0 for r in runners)
    assert status["workers"]["learner_updates_per_s"] >= 0
    shown = CliRunner().invoke(cli, ["status", "async", "--log-dir", str(tmp_path / "logs")])
    assert "2 env runners, async" in shown.output and "runner 1" in shown.output
    events = EventAccumulator(str(tmp_path / "logs/async"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"workers/runner_1_env_steps_per_s", "workers/learner_updates_per_s",
            "workers/queue_transitions"} <= set(tags)
    result = CliRunner().invoke(cli, [
        "resume", "--checkpoint", str(tmp_path / "checkpoints/async/checkpoint_step_150.pt"),
        "--run-name", "again"])
    assert result.exit_code == 0, result.output
    assert checkpoint(tmp_path, "again", 300)["trainer"]["counters"]["env_steps"] == 300


def test_a_runner_killed_with_sigkill_is_restarted_and_the_run_goes_on(tmp_path, monkeypatch):
    original = TrainingMonitor.after_step
    killed = []

    def kill_runner_at_120(self, env_steps):
        if env_steps == 120 and not killed:
            killed.append(kill_runner(trainer.state.collector.runners[0]))
        return original(self, env_steps)

    monkeypatch.setattr(TrainingMonitor, "after_step", kill_runner_at_120)
    config = tiny_config(tmp_path, **{**WORKERS, "run_name": "killed"})
    trainer = Trainer(config, DEVICE, interactive=False)
    assert trainer.run(create_run(config)).status == "finished"
    assert killed
    events = runner_events(tmp_path / "logs/killed")
    assert len(events) == 1 and "env runner 0 was lost" in events[0]["message"]
    # Every transition counted once: the buffer holds exactly the env steps counted.
    state = checkpoint(tmp_path, "killed", 300)
    assert state["trainer"]["counters"]["env_steps"] == 300
    assert state["buffer"]["size"] == 300
    assert state["trainer"]["workers"]["restarts"] == [1, 0]


CRASHING = {"env_name": "fake_envs:FakeCrashingPendulum-v0", "env_kwargs": {"at": 60},
            "eval_freq": 1000}  # the runners' envs raise at their 60th step; no evaluation


def test_a_runner_whose_env_raises_is_started_again_while_restarts_last(tmp_path):
    train(tmp_path, "crashed", worker_max_restarts=1, **CRASHING)
    events = runner_events(tmp_path / "logs/crashed")
    assert len(events) == 2  # both runners' envs raised once, each at its own 60th step
    assert all("simulator crashed" in e["message"] for e in events)


def test_a_runner_whose_env_raises_past_its_restarts_stops_the_run_with_exit_5(tmp_path):
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(tiny_dict(tmp_path, **{
        **WORKERS, **CRASHING, "worker_max_restarts": 0})))
    result = CliRunner().invoke(cli, ["train", "--config", str(config_file),
                                      "--run-name", "stop"])
    assert result.exit_code == 5, result.output
    assert "env runner 0" in result.output and "simulator crashed" in result.output
    assert "rltrain resume --checkpoint" in result.output
    paused = list((tmp_path / "checkpoints/stop").glob("paused_at_step_*.pt"))
    assert len(paused) == 1


def test_workers_without_ray_are_refused_in_one_line_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    result = CliRunner().invoke(cli, ["train", "--config", str(config_file), "--workers", "2"])
    assert result.exit_code == 2
    assert 'pip install "rltrain[workers]"' in result.output


def test_ctrl_c_in_a_terminal_pauses_a_run_with_runners_and_it_resumes(tmp_path):
    """A terminal sends Ctrl-C to the whole foreground group, Ray's processes included:
    the run still pauses with a checkpoint (exit 3) that resumes."""
    import subprocess
    from pathlib import Path

    from test_signals import wait_for_steps

    raw = tiny_dict(tmp_path, **{**WORKERS, "max_timesteps": 100_000, "eval_freq": 10_000})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("rltrain")), "train", "--config", "c.yaml",
         "--run-name", "live"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for_steps(tmp_path, 151)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "[interrupt]" in out, out + err
    paused = sorted((tmp_path / "checkpoints/live").glob("paused_at_step_*.pt"))
    state = load_checkpoint(paused[0])
    step = state["total_steps"]
    assert all(r is not None for r in state["trainer"]["workers"]["runners"])
    resumed = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused[0]),
                                       "--set", f"max_timesteps={step + 60}"])
    assert f"finished at step {step + 60}" in resumed.output, resumed.output


def test_the_state_action_map_samples_the_policy_at_the_runners_states(tmp_path):
    """The actor acts in the runners, so its forward hook sees nothing here: the map
    keeps the runners' states (after the warm-up) with the learner's action there."""
    trainer = train(tmp_path, "map", env_name="fake_envs:FakeShortPendulum-v0",
                    max_timesteps=400, diagnostics={"heatmap_freq": 200})
    assert (tmp_path / "logs/map/heatmaps/heatmap_step_400.png").exists()
    kept = trainer.run_hooks.diagnostics.map
    assert 250 < kept.size <= 300  # the steps after the 100-step warm-up, at a rate near 1
    low, high = kept.low, kept.high
    assert ((kept.actions[:kept.size] >= low) & (kept.actions[:kept.size] <= high)).all()
