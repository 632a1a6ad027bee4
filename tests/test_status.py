"""`rltrain status` after a process died between writing a checkpoint and its status."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.io.checkpoint import write_json


def test_status_names_the_newest_checkpoint_when_the_status_lags_behind(tmp_path):
    log_dir, ckpt_dir = tmp_path / "logs" / "r", tmp_path / "checkpoints" / "r"
    log_dir.mkdir(parents=True)
    ckpt_dir.mkdir(parents=True)
    (log_dir / "config.yaml").write_text("env_name: Pendulum-v1\n")  # marks a run folder
    for name in ("checkpoint_step_100.pt", "checkpoint_step_200.pt", "best_model.pt"):
        (ckpt_dir / name).write_bytes(b"")
    # What a kill -9 right after checkpoint_step_200.pt was written leaves: the status
    # still names the checkpoint before it (the pid is gone, so the run is stopped).
    write_json(log_dir / "status.json", {
        "run": "r", "state": "running", "env_steps": 200, "pid": 2 ** 22 + 12345,
        "host": "elsewhere-host", "latest_checkpoint": str(ckpt_dir / "checkpoint_step_100.pt")})
    report = json.loads(CliRunner().invoke(cli, ["status", str(log_dir), "--json"]).output)
    assert report["latest_checkpoint"] == str(ckpt_dir / "checkpoint_step_200.pt")
    # A status that is up to date is taken as it is.
    (ckpt_dir / "checkpoint_step_200.pt").unlink()
    report = json.loads(CliRunner().invoke(cli, ["status", str(log_dir), "--json"]).output)
    assert report["latest_checkpoint"] == str(ckpt_dir / "checkpoint_step_100.pt")


def test_a_dead_runs_pid_reused_by_another_process_is_neither_alive_nor_signalled(tmp_path):
    """A run killed with -9 while stuck leaves status.json saying "stuck (pid N)". Once
    another process has that id, `status` calls the run stopped and `rltrain pause`
    refuses without signalling that process: the id is paired with its start time."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    import psutil

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        identity = {"pid_started": round(psutil.Process(other.pid).create_time(), 2),
                    "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip()}
        folder = tmp_path / "logs" / "dead"
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text("{}\n")
        write_json(folder / "status.json", {
            "run": "dead", "state": "stuck", "env_steps": 500, "max_timesteps": 1000,
            "stuck": {"call": "step", "seconds": 40}, "pid": other.pid,
            "host": socket.gethostname(), "boot_id": identity["boot_id"],
            "pid_started": identity["pid_started"] - 1000.0})  # the run's own start
        shown = CliRunner().invoke(cli, ["status", str(folder), "--json"])
        assert json.loads(shown.output)["state"] == "stopped", shown.output
        paused = CliRunner().invoke(cli, ["pause", str(folder), "--no-wait"])
        assert paused.exit_code == 2, paused.output
        assert "is not running (state: stopped)" in paused.output
        assert other.poll() is None  # not signalled
        # The process that did write the status is alive and stuck: it is signalled.
        write_json(folder / "status.json", {
            "run": "dead", "state": "stuck", "stuck": {"call": "step", "seconds": 40},
            "pid": other.pid, "host": socket.gethostname(), **identity})
        assert CliRunner().invoke(cli, ["pause", str(folder), "--no-wait"]).exit_code == 0
        assert other.wait(timeout=60) == -15  # SIGTERM
    finally:
        other.kill()
        other.wait()
    assert os.path.exists(folder / "pause.request")
