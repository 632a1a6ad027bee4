"""`rltrain runs`: the run folders under a log folder, newest first, from status.json."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli

from conftest import tiny_dict


def fake_run(log_dir: Path, name: str, age_s: float, **status) -> None:
    folder = log_dir / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("env_name: Pendulum-v1\n")
    (folder / "status.json").write_text(json.dumps({
        "run": name, "state": "finished", "env_steps": 1000, "max_timesteps": 1000,
        "best_eval": -150.25, "best_eval_step": 800, "pid": 1, "host": "elsewhere",
        "updated_at": time.time() - age_s, **status}))


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def make_log_dir(tmp_path: Path) -> Path:
    """A real run ('trained', newest) beside made-up ones and folders that are no runs."""
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    logs = tmp_path / "logs"
    fake_run(logs, "finished_one", age_s=3600)
    fake_run(logs, "crashed", age_s=7200, state="running", host=socket.gethostname(),
             pid=2**22 + 12345, best_eval=None, best_eval_step=None, env_steps=400)
    fake_run(logs, "nan_eval", age_s=60, state="paused", best_eval="nan")
    (logs / "damaged").mkdir()
    (logs / "damaged" / "status.json").write_text("{not json")
    (logs / "notes").mkdir()
    (logs / "notes" / "readme.txt").write_text("not a run")
    (logs / "stray.txt").write_text("a file")
    result = invoke("train", "--config", str(config), "--run-name", "trained", "--steps", "150")
    assert result.exit_code == 0, result.output
    os.utime(logs / "damaged" / "status.json", (time.time() - 10**6,) * 2)
    return logs


def test_runs_lists_run_folders_newest_first_as_json(tmp_path):
    logs = make_log_dir(tmp_path)
    result = invoke("runs", "--log-dir", str(logs), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["run"] for row in rows] == [
        "trained", "nan_eval", "finished_one", "crashed", "damaged"]  # notes: no run
    by_name = {row["run"]: row for row in rows}
    trained = by_name["trained"]
    assert (trained["state"], trained["env_steps"], trained["max_timesteps"]) == \
        ("finished", 150, 150)
    assert trained["best_eval"] is not None and trained["best_eval_step"] == 100
    assert by_name["crashed"]["state"] == "stopped"  # "running", but its process is gone
    assert by_name["damaged"]["state"] == "unreadable"
    assert by_name["finished_one"]["best_eval"] == -150.25
    assert by_name["nan_eval"]["best_eval"] == "nan"
    assert [row["updated_at"] for row in rows] == sorted(
        (row["updated_at"] for row in rows), reverse=True)


def test_runs_prints_one_line_per_run(tmp_path):
    logs = make_log_dir(tmp_path)
    result = invoke("runs", "--log-dir", str(logs))
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATE", "ENV"]
    assert [line.split()[0] for line in lines[1:]] == [
        "trained", "nan_eval", "finished_one", "crashed", "damaged"]
    assert "1000/1000" in lines[3] and "-150.2 (step 800)" in lines[3]
    assert "nan (step 800)" in lines[2] and " stopped " in lines[4]


def test_runs_of_an_empty_or_missing_log_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    empty = invoke("runs", "--log-dir", str(tmp_path / "empty"))
    assert empty.exit_code == 0 and "no runs under" in empty.output
    assert json.loads(invoke("runs", "--log-dir", str(tmp_path / "empty"), "--json").output) == []
    missing = invoke("runs", "--log-dir", str(tmp_path / "none"))
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
