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
