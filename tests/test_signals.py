"""Real processes: Ctrl-C, SIGTERM, kill -9, and `rltrain pause`/`status` on a live run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from rltrain.scripts.cli import cli as rltrain_cli
from rltrain.utils.io.checkpoint import load_checkpoint

from conftest import TESTS_DIR, tiny_dict

EXE = str(Path(sys.executable).with_name("rltrain"))
ENV = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}


def start(tmp_path: Path, env: str = "Pendulum-v1", own_group: bool = False,
          **overrides) -> subprocess.Popen:
    """`own_group`: the run leads its own process group, as a terminal's foreground job
    does, so that a Ctrl-C can be sent to the run and its env workers at once."""
    raw = tiny_dict(tmp_path, **{"max_timesteps": 100_000, "checkpoint_freq": 100,
                                 "eval_freq": 10_000, "env_name": env, **overrides})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return subprocess.Popen([EXE, "train", "--config", str(path), "--run-name", "live"],
                            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=own_group)


def wait_for_steps(tmp_path: Path, steps: int, timeout: float = 120) -> dict:
    status_file = tmp_path / "logs" / "live" / "status.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = json.loads(status_file.read_text())
            if status["env_steps"] >= steps:
                return status
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"the run did not reach {steps} steps")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=300)


def resume(checkpoint: Path, max_timesteps: int) -> Result:
    """`rltrain resume` of a paused checkpoint, in this process: what is tested in a real
    process is the run the signal reached, not the resume after it."""
    return CliRunner().invoke(rltrain_cli, ["resume", "--checkpoint", str(checkpoint),
                                            "--set", f"max_timesteps={max_timesteps}"])


@pytest.mark.parametrize("sig, rule", [(signal.SIGINT, "interrupt"),
                                       (signal.SIGTERM, "terminate"),
                                       # the terminal closed; SLURM's --signal
                                       (signal.SIGHUP, "terminate"),
                                       (signal.SIGUSR1, "terminate"),
                                       (signal.SIGUSR2, "terminate")])
def test_a_signal_pauses_with_a_checkpoint_that_resumes(tmp_path, sig, rule):
    proc = start(tmp_path)
    wait_for_steps(tmp_path, 150)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert f"[{rule}]" in out, out + err
    paused = sorted((tmp_path / "checkpoints" / "live").glob("paused_at_step_*.pt"))
    assert len(paused) == 1
    step = load_checkpoint(paused[0])["total_steps"]
    resumed = resume(paused[0], step + 60)
    assert resumed.exit_code == 0, resumed.output
    assert f"finished at step {step + 60}" in resumed.output, resumed.output


def test_ctrl_c_in_a_terminal_pauses_a_run_with_async_env_workers(tmp_path):
    """A terminal sends Ctrl-C to the whole foreground group: the env workers ignore it,
    so the trainer finishes its step, writes the paused checkpoint and closes them."""
    proc = start(tmp_path, own_group=True, num_envs=2, vector_mode="async")
    wait_for_steps(tmp_path, 151)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "[interrupt]" in out, out + err
    paused = sorted((tmp_path / "checkpoints" / "live").glob("paused_at_step_*.pt"))
    step = load_checkpoint(paused[0])["total_steps"]
    resumed = resume(paused[0], step + 61)
    assert f"finished at step {step + 61}" in resumed.output, resumed.output


def test_a_second_ctrl_c_aborts_at_once_and_keeps_earlier_checkpoints(tmp_path):
    # From step 101 on, each env step takes 30 s: both Ctrl-Cs arrive during that step,
    # and "at once" means the process ends long before the step would.
    proc = start(tmp_path, env="fake_envs:FakeStallingPendulum-v0")
    wait_for_steps(tmp_path, 100)  # status.json is written with the step-100 checkpoint
    deadline = time.monotonic() + 120  # until the training env is inside its slow step
    while not (tmp_path / "slow_step.started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode not in (0, 3)
    newest = tmp_path / "checkpoints" / "live" / "checkpoint_step_100.pt"
    assert (f"aborted at step 100 by a second Ctrl-C, before a checkpoint of it: the 0 env "
            f"steps since {newest} (step 100) are lost; resume with: rltrain resume "
            f"--checkpoint {newest}") in err, err
    folder = tmp_path / "checkpoints" / "live"
    assert not list(folder.glob("paused_at_step_*.pt"))
    periodic = list(folder.glob("checkpoint_step_*.pt"))
    assert periodic and all(load_checkpoint(p)["kind"] == "periodic" for p in periodic)
    status = json.loads((tmp_path / "logs" / "live" / "status.json").read_text())
    assert status["state"] == "aborted"


def test_a_ctrl_c_after_the_pause_is_written_keeps_its_exit_code(tmp_path):
    """Once the paused checkpoint is written and reported, a second Ctrl-C (here while the
    envs close, which takes 3 s) changes nothing: still exit 3, the run still paused."""
    proc = start(tmp_path, env="fake_envs:FakeSlowClosingPendulum-v0")
    wait_for_steps(tmp_path, 150)
    proc.send_signal(signal.SIGINT)
    status_file = tmp_path / "logs" / "live" / "status.json"
    deadline = time.monotonic() + 120  # until the outcome is written: the run then settles
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(status_file.read_text())["state"] == "paused":
                break
        time.sleep(0.05)
    time.sleep(0.5)  # the run is now closing its envs (3 s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, out + err
    assert "resume with: rltrain resume --checkpoint" in out and "Traceback" not in err
    status = json.loads((tmp_path / "logs" / "live" / "status.json").read_text())
    assert status["state"] == "paused"


def start_unbuffered(tmp_path, run_name: str, max_timesteps: int) -> subprocess.Popen:
    """`rltrain train` of a tiny run in a child process, its output unbuffered."""
    raw = tiny_dict(tmp_path, max_timesteps=max_timesteps, checkpoint_freq=100,
                    eval_freq=10_000)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw))
    return subprocess.Popen([EXE, "train", "--config", str(config), "--run-name", run_name],
                            cwd=tmp_path, env={**ENV, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_ctrl_c_after_the_report_keeps_the_exit_code(tmp_path):
    """A second Ctrl-C right after the run has printed its pause (while Python prints,
    exits and shuts down, about a second with torch) still ends with code 3."""
    proc = start_unbuffered(tmp_path, "live", max_timesteps=100_000)
    wait_for_steps(tmp_path, 150)
    proc.send_signal(signal.SIGINT)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(("paused at step", "resume with:")):
            proc.send_signal(signal.SIGINT)  # once after each of the two report lines
    proc.wait(timeout=60)
    assert proc.returncode == 3, "".join(lines) + proc.stderr.read()


def test_the_cli_ignores_ctrl_c_once_the_command_has_ended(monkeypatch):
    import threading

    import rltrain.scripts
    from rltrain.scripts import cli as cli_module

    def paused(**_kwargs):
        raise SystemExit(3)

    monkeypatch.setattr(cli_module, "cli", paused)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # main sets its own
    previous = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit):
            rltrain.scripts.main()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # holds through shutdown
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_the_run_starts_pauses_it_before_its_first_step(tmp_path, monkeypatch):
    from rltrain.scripts.training import trainer

    original = trainer.make_diagnostics

    def interrupted(*args, **kwargs):  # the Ctrl-C lands while the diagnostics load
        os.kill(os.getpid(), signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(trainer, "make_diagnostics", interrupted)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    result = CliRunner().invoke(rltrain_cli, ["train", "--config", str(config),
                                              "--run-name", "r"])
    assert result.exit_code == 3, result.output
    assert "paused at step 0 [interrupt]" in result.output
    paused = tmp_path / "checkpoints" / "r" / "paused_at_step_0.pt"
    monkeypatch.setattr(trainer, "make_diagnostics", original)
    resumed = CliRunner().invoke(rltrain_cli, ["resume", "--checkpoint", str(paused)])
    assert resumed.exit_code == 0 and "finished at step 300" in resumed.output, resumed.output


def test_kill_9_leaves_every_checkpoint_loadable(tmp_path):
    proc = start(tmp_path, checkpoint_freq=10, keep_checkpoints=1000)
    wait_for_steps(tmp_path, 400)
    proc.kill()
    proc.communicate(timeout=60)
    folder = tmp_path / "checkpoints" / "live"
    files = sorted(folder.glob("*.pt"))
    assert len(files) >= 30
    for path in files:
        load_checkpoint(path)
    status = cli("status", "live", "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["state"] == "stopped"


def test_pause_and_status_against_a_live_run(tmp_path):
    proc = start(tmp_path)
    wait_for_steps(tmp_path, 120)
    live = json.loads(cli("status", "live", "--json", cwd=tmp_path).stdout)
    assert live["state"] == "running" and live["pid"] == proc.pid
    assert live["env_steps"] >= 120 and live["max_timesteps"] == 100_000
    text = cli("status", "live", cwd=tmp_path).stdout
    assert "running (pid" in text and "latest checkpoint" in text
    paused = cli("pause", "live", "--reason", "maintenance window", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    assert "resume with: rltrain resume --checkpoint" in paused.stdout
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "maintenance window" in out
    after = json.loads(cli("status", "live", "--json", cwd=tmp_path).stdout)
    assert after["state"] == "paused" and after["paused"] is True
    assert "maintenance window" in after["last_pause_reason"]
    assert after["latest_checkpoint"].endswith(f"paused_at_step_{after['env_steps']}.pt")
    again = cli("pause", "live", cwd=tmp_path)
    assert again.returncode == 2 and "not running (state: paused)" in again.stderr
    missing = cli("status", "nope", cwd=tmp_path)
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_pause_of_a_run_stuck_in_its_env_ends_it_with_a_checkpoint(tmp_path):
    """The env never returns from its 150th step and the run has no env_step_timeout:
    status shows it stuck, and `rltrain pause` still ends it with a checkpoint (exit 5,
    as an env failure: the env did not return)."""
    proc = start(tmp_path, env="fake_envs:FakeHangingPendulum-v0", env_step_timeout=None)
    status_file = tmp_path / "logs" / "live" / "status.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(status_file.read_text())["state"] == "stuck":
                break
        time.sleep(0.1)
    live = json.loads(cli("status", "live", "--json", cwd=tmp_path).stdout)
    assert live["state"] == "stuck" and live["pid"] == proc.pid, live
    assert "inside the env's step for" in cli("status", "live", cwd=tmp_path).stdout
    paused = cli("pause", "live", cwd=tmp_path)
    assert paused.returncode == 0, paused.stdout + paused.stderr
    assert "stuck in the env's step" in paused.stdout
    assert "resume with: rltrain resume --checkpoint" in paused.stdout, paused.stdout
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, out + err
    assert "was still in step after" in err and "SIGTERM came" in err, err
    checkpoint = tmp_path / "checkpoints" / "live" / "paused_at_step_149.pt"
    assert load_checkpoint(checkpoint)["total_steps"] == 149


def train_in_process(tmp_path: Path, monkeypatch, step_hook) -> None:
    """A tiny run through the CLI in this process, with `Trainer._step` replaced by
    `step_hook(the original _step)`; it must finish at step 300."""
    from rltrain.scripts.training.trainer import Trainer

    monkeypatch.setattr(Trainer, "_step", step_hook(Trainer._step))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    result = CliRunner().invoke(rltrain_cli, ["train", "--config", str(config),
                                              "--run-name", "r"])
    assert result.exit_code == 0 and "finished at step 300" in result.output, result.output


def test_a_ctrl_c_on_the_last_step_finishes_the_run(tmp_path, monkeypatch):
    """Paused at max_timesteps, a run could not be resumed (nothing left to train)."""
    def hook(original):
        def step(self):
            original(self)
            if self.state.counters.env_steps == self.config.max_timesteps:
                os.kill(os.getpid(), signal.SIGINT)
        return step

    train_in_process(tmp_path, monkeypatch, hook)
    status = json.loads((tmp_path / "logs" / "r" / "status.json").read_text())
    assert status["state"] == "finished"


def test_a_ctrl_c_while_the_command_imports_ends_quietly(monkeypatch, capsys):
    """The `rltrain` entry point: a Ctrl-C inside the CLI's imports (torch, a second or
    two) ends with code 130 and one line, not a traceback from inside an import."""
    import types

    import rltrain.scripts

    class Interrupted(types.ModuleType):
        def __getattr__(self, name):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "rltrain.scripts.cli", Interrupted("rltrain.scripts.cli"))
    with pytest.raises(SystemExit) as stopped:
        rltrain.scripts.main()
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "rltrain: interrupted while starting; nothing was written\n"


def test_a_pause_request_on_the_last_step_finishes_the_run(tmp_path, monkeypatch):
    """`rltrain pause` goes through the same path as Ctrl-C: on the last step, finish."""
    def hook(original):
        def step(self):
            if self.state.counters.env_steps == self.config.max_timesteps - 1:
                self.paths.pause_request_file.write_text("too late")  # read after this step
            original(self)
        return step

    train_in_process(tmp_path, monkeypatch, hook)


def test_a_sigterm_after_a_finished_run_reports_keeps_exit_0(tmp_path):
    """A SIGTERM while a finished run shuts down (after its report, while Python exits,
    about a second with torch) changes nothing, as a Ctrl-C there does: exit 0."""
    proc = start_unbuffered(tmp_path, "done", max_timesteps=300)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("finished at step"):
            proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 0, "".join(lines) + proc.stderr.read()


def test_a_second_ctrl_c_while_the_pause_is_written_does_not_lose_it(tmp_path, monkeypatch):
    """Once the run has decided to pause, a second Ctrl-C no longer aborts: it aborted the
    paused checkpoint's write, losing it and every step since the last one."""
    from rltrain.utils.run.monitor import TrainingMonitor

    take_pause = TrainingMonitor.take_pause

    def interrupted_twice(self, steps):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        return take_pause(self, steps)

    monkeypatch.setattr(TrainingMonitor, "take_pause", interrupted_twice)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_dict(tmp_path, min_reward_threshold=0.0)))
    result = CliRunner().invoke(rltrain_cli, ["train", "--config", str(path),
                                              "--run-name", "p"])
    assert result.exit_code == 3, result.output
    assert list((tmp_path / "checkpoints" / "p").glob("paused_at_step_*.pt"))
