"""`rltrain sweep` on a local Ray: trials, summary, retry of a killed trial, Ctrl-C, bad
input."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.workers.ray_start import init_ray
from rltrain.utils.run.log_files import read_jsonl

from conftest import TESTS_DIR, tiny_dict

ray = pytest.importorskip("ray", reason="the [sweep] extra (Ray Tune) is part of [dev]")


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One local Ray for the module; workers inherit PYTHONPATH (fake_envs), the marker
    and the gate (FakeGatedPendulum's)."""
    marker = tmp_path_factory.mktemp("kill") / "killed"
    names = ("PYTHONPATH", "RLTRAIN_TEST_KILL_MARKER", "RLTRAIN_TEST_GATE")
    old = {k: os.environ.get(k) for k in names}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR),
                                                             old["PYTHONPATH"]]))
    os.environ["RLTRAIN_TEST_KILL_MARKER"] = str(marker)
    os.environ["RLTRAIN_TEST_GATE"] = str(marker.with_name("gate"))
    init_ray(ray, num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # retried on a loaded machine
    yield marker
    ray.shutdown()
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def config_file(tmp_path: Path, **overrides) -> Path:
    path = tmp_path / "c.yaml"
    raw = tiny_dict(tmp_path, **{"max_timesteps": 400, "eval_freq": 100,
                                 "checkpoint_freq": 100, **overrides})
    path.write_text(yaml.safe_dump(raw))
    return path


def sweep(*args: str):
    return CliRunner().invoke(cli, ["sweep", *args], catch_exceptions=False)


def test_a_two_trial_grid_sweep_completes_and_writes_the_summary(tmp_path, local_ray):
    result = sweep("--config", str(config_file(tmp_path)), "--seeds", "1", "--grid",
                   "tau=0.005,0.01", "--name", "grid")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "logs" / "grid"
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert [r["grid_point"] for r in rows] == ["tau=0.005", "tau=0.01"]
    assert all(r["seeds"] == "1" and r["paused"] == "0" and r["unfinished"] == "0"
               for r in rows)
    assert all(float(r["env_steps_mean"]) == 400 for r in rows)
    summary = json.loads((folder / "summary.json").read_text())
    assert {t["run"] for t in summary["trials"]} == {"grid_tau-0.005_s3", "grid_tau-0.01_s3"}
    assert all(t["state"] == "finished" for t in summary["trials"])
    assert (folder / "learning_curves.png").stat().st_size > 1000
    for run in ("grid_tau-0.005_s3", "grid_tau-0.01_s3"):  # ordinary rltrain runs
        assert (folder / run / "metrics.jsonl").exists()
        assert (tmp_path / "checkpoints" / "grid" / run / "checkpoint_step_400.pt").exists()
    config = yaml.safe_load((folder / "grid_tau-0.01_s3" / "config.yaml").read_text())
    assert config["tau"] == 0.01 and config["seed"] == 3
    again = sweep("--resume", "grid", "--log-dir", str(tmp_path / "logs"),
                  "--set", f"checkpoint_dir={tmp_path / 'checkpoints'}")
    assert again.exit_code == 0, again.output
    for run in ("grid_tau-0.005_s3", "grid_tau-0.01_s3"):  # finished trials are not rerun
        lines = (folder / run / "metrics.jsonl").read_text()
        assert '"resume"' not in lines


def test_a_sweep_over_an_algorithms_own_option_trains_each_point(tmp_path, local_ray):
    """CrossQ's own section in a grid, as any key: each trial trains crossq with it."""
    result = sweep("--config", str(config_file(tmp_path, algo="crossq", max_timesteps=200)),
                   "--seeds", "1", "--grid", "crossq.policy_delay=1,3", "--name", "cq")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "logs" / "cq"
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert [r["grid_point"] for r in rows] == ["crossq.policy_delay=1",
                                               "crossq.policy_delay=3"]
    for run, delay in (("cq_crossq.policy_delay-1_s3", 1), ("cq_crossq.policy_delay-3_s3", 3)):
        config = yaml.safe_load((folder / run / "config.yaml").read_text())
        assert (config["algo"], config["crossq"]["policy_delay"]) == ("crossq", delay)


def test_a_killed_trial_is_retried_from_its_checkpoint_and_finishes(tmp_path, local_ray):
    # Evaluation only at the end, so that the training env's 250th step comes first.
    path = config_file(tmp_path, env_name="fake_envs:FakeKillOncePendulum-v0", eval_freq=400)
    result = sweep("--config", str(path), "--seeds", "1", "--name", "kill",
                   "--max-failures", "2")
    assert result.exit_code == 0, result.output
    assert local_ray.exists()  # the worker really was killed once
    run = tmp_path / "logs" / "kill" / "kill_s3"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    resumes = [m for m in metrics if m["kind"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["env_steps"] == 200  # the checkpoint before 250
    summary = json.loads((tmp_path / "logs" / "kill" / "summary.json").read_text())
    assert summary["trials"][0]["state"] == "finished"
    assert summary["trials"][0]["env_steps"] == 400


def test_a_trial_killed_before_its_first_checkpoint_starts_again(tmp_path, local_ray):
    # Killed at step 250, its first checkpoint due at 300: Tune has nothing to restore.
    # The retry starts the trial anew; the folders of the attempt are kept beside it.
    local_ray.unlink(missing_ok=True)
    path = config_file(tmp_path, env_name="fake_envs:FakeKillOncePendulum-v0", eval_freq=400,
                       checkpoint_freq=300)
    result = sweep("--config", str(path), "--seeds", "1", "--name", "early",
                   "--max-failures", "2")
    assert result.exit_code == 0, result.output
    assert local_ray.exists()  # the worker really was killed once
    logs = tmp_path / "logs" / "early"
    summary = json.loads((logs / "summary.json").read_text())
    assert summary["trials"][0]["state"] == "finished"
    assert summary["trials"][0]["env_steps"] == 400
    assert '"resume"' not in (logs / "early_s3" / "metrics.jsonl").read_text()
    attempt = json.loads((logs / "early_s3.attempt-1" / "status.json").read_text())
    assert attempt["env_steps"] < 300  # the attempt that was killed, kept
    assert (tmp_path / "checkpoints" / "early" / "early_s3" / "checkpoint_step_300.pt").exists()


def test_a_trial_paused_by_a_health_rule_stays_paused_with_its_reason(tmp_path, local_ray):
    # Every Pendulum episode scores below 0: catastrophic_reward pauses after the first.
    path = config_file(tmp_path, min_reward_threshold=0.0)
    result = sweep("--config", str(path), "--seeds", "1", "--name", "paused")
    assert result.exit_code == 0, result.output  # paused is an outcome, not a failure
    summary = json.loads((tmp_path / "logs" / "paused" / "summary.json").read_text())
    trial = summary["trials"][0]
    assert trial["state"] == "paused" and trial["env_steps"] == 200
    assert "catastrophic_reward" in trial["pause_reason"]
    assert summary["points"][0]["paused"] == 1 and summary["points"][0]["unfinished"] == 0
    paused = tmp_path / "checkpoints" / "paused" / "paused_s3" / "paused_at_step_200.pt"
    assert paused.exists()  # resumable like any paused run; not retried by Tune
    metrics = (tmp_path / "logs" / "paused" / "paused_s3" / "metrics.jsonl").read_text()
    assert '"resume"' not in metrics


def wait_for(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_ctrl_c_pauses_the_running_trials_and_resume_continues_them(tmp_path, local_ray):
    # Each trial's env holds its 250th step until the gate opens (evaluation only at the
    # end, so that the training env's step comes first): the Ctrl-C lands while both are
    # held there, and each pauses after that step, past its periodic checkpoint at 200.
    gate = Path(os.environ["RLTRAIN_TEST_GATE"])
    gate.unlink(missing_ok=True)
    path = config_file(tmp_path, env_name="fake_envs:FakeGatedPendulum-v0", eval_freq=400,
                       torch_threads=1)
    address = ray.get_runtime_context().gcs_address  # the driver joins this module's Ray
    driver = subprocess.Popen(  # its own process group, as a terminal's foreground job
        [str(Path(sys.executable).with_name("rltrain")), "sweep", "--config", str(path),
         "--grid", "tau=0.005,0.01", "--name", "cc", "--address", address],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    runs = ["cc_tau-0.005_s3", "cc_tau-0.01_s3"]
    logs, checkpoints = tmp_path / "logs" / "cc", tmp_path / "checkpoints" / "cc"
    try:
        wait_for(lambda: len(list(gate.parent.glob("gate.held.*"))) == 2,
                 "both trials to reach the gate")
        os.killpg(driver.pid, signal.SIGINT)  # Ctrl-C in a terminal
        wait_for(lambda: all((logs / r / "pause.request").exists() for r in runs),
                 "the pause requests", timeout=30)
        gate.write_text("open")
        out, _ = driver.communicate(timeout=120)
    finally:
        gate.write_text("open")  # never leave the trials held
        driver.kill()
    assert driver.returncode == 1, out  # interrupted trials are unfinished
    assert "pausing 2 running trial(s) with a checkpoint" in out, out
    for run in runs:
        assert sorted(p.name for p in (checkpoints / run).glob("*.pt")) == [
            "checkpoint_step_100.pt", "checkpoint_step_200.pt", "paused_at_step_250.pt"]
        status = json.loads((logs / run / "status.json").read_text())
        assert status["state"] == "paused" and status["env_steps"] == 250
        assert "sweep was interrupted (Ctrl-C)" in status["pause_reason"]
    summary = json.loads((logs / "summary.json").read_text())
    assert [t["state"] for t in summary["trials"]] == ["interrupted", "interrupted"]
    resumed = sweep("--resume", "cc", "--log-dir", str(tmp_path / "logs"),
                    "--set", f"checkpoint_dir={tmp_path / 'checkpoints'}")
    assert resumed.exit_code == 0, resumed.output
    for run in runs:
        metrics = read_jsonl(logs / run / "metrics.jsonl")
        assert [m["env_steps"] for m in metrics if m["kind"] == "resume"] == [250]
    summary = json.loads((logs / "summary.json").read_text())
    assert [(t["state"], t["env_steps"]) for t in summary["trials"]] == [("finished", 400)] * 2
    assert_like_an_uninterrupted_run(tmp_path, checkpoints / runs[1] / "checkpoint_step_400.pt")


def assert_like_an_uninterrupted_run(tmp_path: Path, checkpoint: Path) -> None:
    """The trial (tau 0.01) trained on exactly as a run of its config that never stopped."""
    import torch

    from rltrain.scripts.training.trainer import Trainer
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.io.checkpoint import load_checkpoint
    from rltrain.utils.run.folders import create_run

    raw = yaml.safe_load((tmp_path / "c.yaml").read_text())
    config = config_from_dict(raw | {"tau": 0.01, "run_name": "reference"})
    threads = torch.get_num_threads()  # the Trainer sets the config's torch_threads
    try:
        trainer = Trainer(config, torch.device("cpu"), interactive=False)
        assert trainer.run(create_run(config)).status == "finished"
    finally:
        torch.set_num_threads(threads)
    ours, reference = load_checkpoint(checkpoint), load_checkpoint(
        trainer.paths.periodic_checkpoint(400))
    for key in ("actor", "critic", "actor_target", "critic_target"):
        for name, value in reference[key].items():
            assert torch.equal(ours[key][name], value), f"{key}.{name}"
    assert torch.equal(ours["buffer"]["data"], reference["buffer"]["data"])


def test_a_second_ctrl_c_stops_the_wait_for_the_trials(tmp_path, capsys):
    """SweepPause on its own: the first Ctrl-C asks each running trial (again, when a
    starting trial deleted the request), the second hands the Ctrl-C on to Tune."""
    from types import SimpleNamespace

    from rltrain.scripts.sweep.sweep_pause import HANDED_ON_FILE, SweepPause

    def trial(name: str):
        (tmp_path / name).mkdir()
        return SimpleNamespace(trial_id=name, status="RUNNING", RUNNING="RUNNING",
                               config={"trial": {"run_name": name}}, last_result={})

    to_tune = []
    before = signal.signal(signal.SIGINT, lambda *_: to_tune.append("Ctrl-C"))  # Tune's
    try:
        pause = SweepPause(tmp_path)
        pause.setup()
        trials = [trial("a"), trial("b")]
        pause.on_step_end(1, trials)  # no Ctrl-C yet
        assert not (tmp_path / "a" / "pause.request").exists()
        os.kill(os.getpid(), signal.SIGINT)
        pause.on_step_end(2, trials)
        assert all((tmp_path / n / "pause.request").exists() for n in "ab")
        for name in "ab":  # a took its request and paused; b was starting and deleted it
            (tmp_path / name / "pause.request").unlink()
        trials[0].last_result = {"status": "paused"}
        pause.on_checkpoint(3, trials, trials[0], None)  # Tune holds a's paused checkpoint
        pause.on_step_end(3, trials)
        assert not (tmp_path / "a" / "pause.request").exists()
        assert (tmp_path / "b" / "pause.request").exists() and to_tune == []
        os.kill(os.getpid(), signal.SIGINT)
        pause.on_step_end(4, trials)
        assert to_tune == ["Ctrl-C"] and (tmp_path / HANDED_ON_FILE).exists()
    finally:
        signal.signal(signal.SIGINT, before)
    err = capsys.readouterr().err
    assert "1 trial(s) did not pause; Tune stops them" in err


def test_a_paused_trial_waits_for_the_hand_over_but_not_forever(tmp_path, monkeypatch):
    from rltrain.scripts.sweep import sweep_pause

    (tmp_path / sweep_pause.HANDED_ON_FILE).write_text("")
    start = time.monotonic()
    sweep_pause.wait_for_hand_over(tmp_path)  # handed over: at once
    (tmp_path / sweep_pause.HANDED_ON_FILE).unlink()
    monkeypatch.setattr(sweep_pause, "HAND_OVER_WAIT_SECONDS", 0.3)
    sweep_pause.wait_for_hand_over(tmp_path)  # a driver that never hands over
    assert 0.3 <= time.monotonic() - start < 5


def test_a_sweep_stopped_before_tune_saved_anything_resumes_by_starting_anew(
        tmp_path, monkeypatch):
    """A Ctrl-C while Ray starts leaves the plan but no Tune state: `--resume` runs the
    plan on a new Tuner (each trial still resumes from its own folder), not a restore."""
    from ray import tune

    from rltrain.scripts.sweep import sweep as sweeps

    plan = {"config": "c.yaml", "cpus_per_trial": 1, "max_concurrent": None,
            "max_failures": 1, "trials": [{"run_name": "t", "point": "", "overrides": []}]}
    monkeypatch.setattr(tune.Tuner, "restore", lambda *a, **k: pytest.fail("restored"))
    tuner = sweeps._tuner(tmp_path, plan, restore=True)
    assert isinstance(tuner, tune.Tuner)


def test_a_trial_that_cannot_run_is_reported_failed_and_not_retried(tmp_path, local_ray):
    # A registered env DDPG cannot train on (discrete actions): the plan, which looks up
    # env ids, passes it; the trial's env refuses it.
    path = config_file(tmp_path, env_name="CartPole-v1")
    result = CliRunner().invoke(cli, ["sweep", "--config", str(path), "--seeds", "2",
                                      "--name", "broken", "--max-failures", "3"])
    assert result.exit_code == 1, result.output
    assert "2 trial(s) did not finish" in result.output
    summary = json.loads((tmp_path / "logs" / "broken" / "summary.json").read_text())
    assert [t["state"] for t in summary["trials"]] == ["failed", "failed"]
    for trial in summary["trials"]:  # one attempt each: bad input is not retried
        assert "'CartPole-v1' has a Discrete action space" in trial["error"]
        assert "\n" not in trial["error"]
    assert summary["points"][0]["unfinished"] == 2


@pytest.mark.parametrize("grid, message", [
    ("tau", "--grid expects key=v1,v2"),
    ("tau=", "--grid expects key=v1,v2"),
    ("tau=0.1,,0.2", "--grid expects key=v1,v2"),
    ("gama=0.9,0.95", "did you mean 'gamma'"),
    ("gamma=0.9,2", r"'gamma' must be a number in \(0, 1\]"),
    ("hidden_sizes=[8,8],[16", r"--grid hidden_sizes: cannot parse value '\[16'"),
    # Keys the sweep sets for each trial: they used to be overwritten silently.
    ("seed=1,2", r"--grid cannot vary 'seed': .*--seeds"),
    ("run_name=a,b", "--grid cannot vary 'run_name'"),
    ("log_dir=/tmp/a,/tmp/b", "--grid cannot vary 'log_dir'"),
    ("checkpoint_dir=/tmp/a,/tmp/b", "--grid cannot vary 'checkpoint_dir'"),
    ("tau=0.01 --set run_name=x", "--set run_name: the sweep names its trials"),
])
def test_a_bad_grid_spec_is_a_clear_error(tmp_path, grid, message):
    import re

    grid, _, extra = grid.partition(" ")
    result = CliRunner().invoke(cli, ["sweep", "--config", str(config_file(tmp_path)),
                                      "--grid", grid, *extra.split(), "--name", "bad"])
    assert result.exit_code == 2 and re.search(message, result.output), result.output
    assert not (tmp_path / "logs" / "bad").exists()


def test_a_grid_over_lists_plans_one_trial_per_list(tmp_path):
    from rltrain.scripts.sweep.sweep_plan import plan_trials
    from rltrain.utils.config.loader import load_config

    path = str(config_file(tmp_path))
    trials = plan_trials(path, (), ("hidden_sizes=[8, 8],[16,16]", "tau=0.01,0.02"), 1, "g")
    assert [t.run_name for t in trials] == [
        "g_hidden_sizes-8_8_tau-0.01_s3", "g_hidden_sizes-8_8_tau-0.02_s3",
        "g_hidden_sizes-16_16_tau-0.01_s3", "g_hidden_sizes-16_16_tau-0.02_s3"]
    configs = [load_config(str(config_file(tmp_path)), t.overrides) for t in trials]
    assert [(c.hidden_sizes, c.tau, c.seed, c.run_name) for c in configs] == [
        ((8, 8), 0.01, 3, trials[0].run_name), ((8, 8), 0.02, 3, trials[1].run_name),
        ((16, 16), 0.01, 3, trials[2].run_name), ((16, 16), 0.02, 3, trials[3].run_name)]


@pytest.mark.parametrize("text, values", [
    ("0.1,0.2", ["0.1", "0.2"]),
    ("[8, 8],[16,16]", ["[8, 8]", "[16,16]"]),
    ("{a: 1, b: 2},{a: 3}", ["{a: 1, b: 2}", "{a: 3}"]),
    ("'x,y',z", ["'x,y'", "z"]),
    ("it's,x", ["it's", "x"]),  # a quote inside a plain scalar quotes nothing
    ('"a\\",b",c', ['"a\\",b"', "c"]),  # an escaped quote in a double-quoted one
    ('["x]", "y"],[z]', ['["x]", "y"]', "[z]"]),
])
def test_grid_values_split_at_the_commas_between_values(text, values):
    from rltrain.scripts.sweep.sweep_plan import _split_values

    assert _split_values(text) == values


def test_grid_points_that_make_the_same_trial_are_refused(tmp_path):
    from rltrain.scripts.sweep.sweep_plan import plan_trials
    from rltrain.utils.errors import ConfigError

    path = str(config_file(tmp_path))
    for grid in ("tau=0.01,0.01", "hidden_sizes=[8,8],[8, 8]"):
        with pytest.raises(ConfigError, match="make the same trial"):
            plan_trials(path, (), (grid,), 1, "g")
    with pytest.raises(ConfigError, match="unbalanced"):
        plan_trials(path, (), ("tau=0.1],0.2",), 1, "g")


class FakeTune:
    """Tune's session as a trial sees it, with no checkpoint to hand back."""

    def __init__(self) -> None:
        self.reports: list[dict] = []

    def get_checkpoint(self):
        return None

    def report(self, metrics, checkpoint=None):
        self.reports.append(metrics)


def trial_params(tmp_path: Path, name: str) -> dict:
    overrides = [f"log_dir={tmp_path / 'logs' / 'sw'}", "seed=3", f"run_name={name}",
                 f"checkpoint_dir={tmp_path / 'checkpoints' / 'sw'}"]
    return {"config": str(config_file(tmp_path)), "overrides": overrides, "run_name": name,
            "threads": 1}


def test_a_trial_tune_has_no_checkpoint_for_resumes_from_its_own_newest(tmp_path,
                                                                        monkeypatch):
    # The env fails (in the evaluation at step 100); Tune (here) has no checkpoint of the
    # trial, its folder has.
    from rltrain.scripts.sweep.sweep import _run_trial
    from rltrain.utils.errors import EnvFailure

    import fake_envs

    params = trial_params(tmp_path, "t")
    params["overrides"].append("env_name=fake_envs:FakeCrashingPendulum-v0")
    with pytest.raises(EnvFailure):
        _run_trial(params, FakeTune())
    monkeypatch.setattr(fake_envs.CrashingPendulum, "broken", False)
    tune = FakeTune()
    _run_trial(params, tune)  # as Tune's retry would
    resumes = [m for m in read_jsonl(tmp_path / "logs" / "sw" / "t" / "metrics.jsonl")
               if m["kind"] == "resume"]
    assert [m["env_steps"] for m in resumes] == [100]
    assert tune.reports[-1]["status"] == "finished" and tune.reports[-1]["env_steps"] == 400
    # Finished already (stopped before it told Tune): reported as such, nothing retrained.
    metrics = (tmp_path / "logs" / "sw" / "t" / "metrics.jsonl").read_text()
    again = FakeTune()
    _run_trial(params, again)
    assert again.reports == [{"env_steps": 400, "best_eval": tune.reports[-1]["best_eval"],
                              "eval_mean_return": tune.reports[-1]["eval_mean_return"],
                              "status": "finished"}]
    assert (tmp_path / "logs" / "sw" / "t" / "metrics.jsonl").read_text() == metrics


@pytest.mark.parametrize("own, expected", [
    (["checkpoint_step_100.pt"], "checkpoint_step_200.pt"),  # e.g. from another node
    (["checkpoint_step_200.pt", "paused_at_step_250.pt"], "paused_at_step_250.pt"),
    ([], "checkpoint_step_200.pt"),
])
def test_a_continued_trial_resumes_from_the_newer_of_tunes_and_its_own_checkpoint(
        tmp_path, own, expected):
    # A pause after the trial's last report to Tune leaves the newer checkpoint in the run.
    from ray.tune import Checkpoint

    from rltrain.scripts.sweep.sweep import _checkpoint_to_resume
    from rltrain.utils.run.folders import RunPaths

    paths = RunPaths("r", tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r")
    paths.checkpoint_dir.mkdir(parents=True)
    for name in own:
        (paths.checkpoint_dir / name).write_text("own")
    held = tmp_path / "tune"
    held.mkdir()
    (held / "checkpoint_step_200.pt").write_text("tune's")
    tune = FakeTune()
    tune.get_checkpoint = lambda: Checkpoint.from_directory(str(held))
    chosen = _checkpoint_to_resume(tune, paths)
    assert chosen == paths.checkpoint_dir / expected and chosen.exists()


def test_an_attempt_is_not_set_aside_while_a_process_holds_its_run(tmp_path):
    from rltrain.utils.errors import UserError
    from rltrain.utils.run.folders import RunLock, RunPaths, set_aside_attempt

    paths = RunPaths("r", tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r")
    paths.log_dir.mkdir(parents=True)
    (paths.log_dir / "metrics.jsonl").write_text("{}\n")
    held = RunLock(paths)
    with pytest.raises(UserError, match="in use by another rltrain process"):
        set_aside_attempt(paths)
    assert (paths.log_dir / "metrics.jsonl").exists()
    held.release()
    assert set_aside_attempt(paths) == [tmp_path / "logs" / "r.attempt-1"]
    paths.checkpoint_dir.mkdir(parents=True)  # now only this one holds something
    (paths.checkpoint_dir / "best_model.pt").write_text("x")
    assert set_aside_attempt(paths) == [tmp_path / "checkpoints" / "r.attempt-1"]


def test_without_ray_the_sweep_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    result = CliRunner().invoke(cli, ["sweep", "--config", str(config_file(tmp_path))])
    assert result.exit_code == 2
    assert result.output.strip() == 'Error: rltrain sweep needs Ray Tune: pip install ' \
                                    '"rltrain[sweep]"'


@pytest.mark.parametrize("args, message", [
    (["--set", "device=cuda"], "device cuda needs GPUs for the trials: add --gpus-per-trial"),
    (["--gpus-per-trial", "0.5"], "this machine has no CUDA GPU for local Ray"),
    (["--gpus-per-trial", "nan"], "--gpus-per-trial must be a finite number; got nan"),
])
def test_gpus_for_the_trials_are_asked_for_where_they_are_needed(tmp_path, monkeypatch,
                                                                 args, message):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this machine
    if "device=cuda" in args:  # the config check of device: cuda, passed as on a GPU machine
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    result = CliRunner().invoke(cli, ["sweep", "--config", str(config_file(tmp_path)),
                                      "--name", "gpu", *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "logs" / "gpu").exists()


def test_trials_reserve_gpus_only_when_asked():
    from rltrain.scripts.sweep.sweep import trial_resources

    assert trial_resources({"cpus_per_trial": 2}) == {"cpu": 2}  # a plan from before GPUs
    assert trial_resources({"cpus_per_trial": 1, "gpus_per_trial": 0.25}) == {
        "cpu": 1, "gpu": 0.25}


@pytest.mark.parametrize("args", [["--name", "../../outside"], ["--name", "a/b"],
                                  ["--resume", "../outside"]])
def test_a_sweep_name_that_is_no_plain_folder_name_is_refused(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["sweep", "--config", str(config_file(tmp_path)),
                                      "--log-dir", str(tmp_path / "logs"), *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"Error: a sweep's name must be a plain folder name (letters, digits, '-', '_', "
        f"'.'); got {args[1]!r}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def planted_sweep(tmp_path: Path, plan: dict | str) -> Path:
    """A sweep folder `logs/sw` with `plan` as its sweep.yaml."""
    folder = tmp_path / "logs" / "sw"
    folder.mkdir(parents=True)
    text = plan if isinstance(plan, str) else yaml.safe_dump(plan)
    (folder / "sweep.yaml").write_text(text)
    return folder


def finished_trial_plan(tmp_path: Path, **extra) -> dict:
    return {"config": str(config_file(tmp_path)), "cpus_per_trial": 1, "max_failures": 0,
            "max_concurrent": None, **extra,
            "trials": [{"run_name": "sw_s3", "point": "base", "overrides": [
                f"log_dir={tmp_path / 'logs' / 'sw'}", "seed=3", "run_name=sw_s3",
                f"checkpoint_dir={tmp_path / 'checkpoints' / 'sw'}"]}]}


def test_resume_never_unpickles_tunes_saved_state(tmp_path, monkeypatch, local_ray):
    """A tuner.pkl in the sweep's folder (Tune's state, a pickle) that would run code
    when loaded: `--resume` runs the plan on a new Tuner and never loads it."""
    import pickle

    marker = tmp_path / "the_pickle_ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    folder = planted_sweep(tmp_path, finished_trial_plan(tmp_path))
    (folder / "tune").mkdir()
    (folder / "tune" / "tuner.pkl").write_bytes(pickle.dumps(Planted()))
    (folder / "sw_s3").mkdir()
    (folder / "sw_s3" / "status.json").write_text(json.dumps(
        {"run": "sw_s3", "state": "finished", "env_steps": 400}))
    monkeypatch.chdir(tmp_path)  # the plan's checkpoints are ./checkpoints/sw
    result = sweep("--resume", "sw", "--log-dir", str(tmp_path / "logs"))
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    summary = json.loads((folder / "summary.json").read_text())
    assert [t["state"] for t in summary["trials"]] == ["finished"]


@pytest.mark.parametrize("plan, says", [
    ("[1, 2]", "must be a YAML mapping"),
    ("trials: 5\ncpus_per_trial: 1\nmax_failures: 0\n", "'trials' is not a list"),
    ("\xff\xfe", "cannot read config"),
    ("trials: [{run_name: ../x, point: p, overrides: []}]\ncpus_per_trial: 1\n"
     "max_failures: 0\n", "a trial is not a run name"),
    ("config: c.yaml\ncpus_per_trial: many\n", "'cpus_per_trial' is not a number"),
])
def test_a_damaged_sweep_plan_is_one_line_on_resume(tmp_path, plan, says):
    folder = planted_sweep(tmp_path, "")
    (folder / "sweep.yaml").write_bytes(plan.encode("latin-1"))
    result = CliRunner().invoke(cli, ["sweep", "--resume", "sw", "--log-dir",
                                      str(tmp_path / "logs")])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and says in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["sweep.yaml"]


def test_a_resumed_sweep_takes_no_command_or_folder_from_its_plan(tmp_path, monkeypatch):
    from rltrain.scripts.sweep.sweep_plan import plan_for_resume, trial_config
    from rltrain.utils.errors import UserError

    monkeypatch.chdir(tmp_path)
    plan = finished_trial_plan(tmp_path)
    plan["trials"][0]["overrides"] += ["notify.command=touch pwned", "tau=0.01",
                                       f"checkpoint_dir={tmp_path / 'elsewhere' / 'sw'}"]
    folder, said = tmp_path / "logs" / "sw", []
    with pytest.raises(UserError, match=f"puts its checkpoints in '{tmp_path}/elsewhere/sw'"
                       f".*--set checkpoint_dir={tmp_path}/elsewhere$"):
        plan_for_resume(plan, folder, (), said.append)
    moved = plan_for_resume(plan, folder, (f"checkpoint_dir={tmp_path / 'elsewhere'}",),
                            said.append)
    assert trial_config(moved["config"], moved["trials"][0]["overrides"]).checkpoint_dir == \
        str(tmp_path / "elsewhere" / "sw")
    plan["trials"][0]["overrides"].pop()  # the default checkpoints/sw of this folder
    said.clear()
    resumed = plan_for_resume(plan, folder, (), said.append)
    config = trial_config(resumed["config"], resumed["trials"][0]["overrides"])
    assert config.notify.command is None and config.tau == 0.01
    assert config.log_dir == str(folder)
    assert said == ["not taken from the sweep's plan (commands and addresses come only "
                    "from your own --set): notify.command"]
    given = plan_for_resume(plan, folder, ("notify.command=echo mine",), said.append)
    assert trial_config(given["config"],
                        given["trials"][0]["overrides"]).notify.command == "echo mine"


def test_a_trial_paused_as_its_outcome_is_reported_not_resumed_when_run_again(tmp_path):
    """What Tune's restored state used to know, the trial's folder says: a trial paused by
    a health rule is reported paused by a resumed sweep, and trains no further."""
    from rltrain.scripts.sweep.sweep import _run_trial

    params = trial_params(tmp_path, "t")
    params["overrides"].append("min_reward_threshold=0.0")
    first = FakeTune()
    _run_trial(params, first)
    assert first.reports[-1]["status"] == "paused"
    metrics = (tmp_path / "logs" / "sw" / "t" / "metrics.jsonl").read_text()
    again = FakeTune()
    _run_trial(params, again)
    assert [r["status"] for r in again.reports] == ["paused"]
    assert "catastrophic_reward" in again.reports[0]["pause_reason"]
    assert (tmp_path / "logs" / "sw" / "t" / "metrics.jsonl").read_text() == metrics
