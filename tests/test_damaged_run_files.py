"""A run's files damaged or edited by hand (a stray byte, a line of the wrong shape, a
field of the wrong type, a stray file): `status`, `diagnose` and `runs` read around what
they cannot read, say so in one line ("unreadable, skipped: ..."), and never print a
traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rltrain.scripts.cli import cli


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def edit_status(folder: Path, **fields) -> None:
    status = json.loads((folder / "status.json").read_text())
    (folder / "status.json").write_text(json.dumps({**status, **fields}))


DAMAGES = {
    "a 0xFF byte in events.jsonl": (
        lambda f: append(f / "events.jsonl", b"\xff\n"), "events.jsonl (1 line)"),
    "a [1, 2] line in events.jsonl": (
        lambda f: append(f / "events.jsonl", b"[1, 2]\n"), "events.jsonl (1 line)"),
    "a [1, 2] line in metrics.jsonl": (
        lambda f: append(f / "metrics.jsonl", b"[1, 2]\n"), "metrics.jsonl (1 line)"),
    "a metrics line without env_steps": (
        lambda f: append(f / "metrics.jsonl", b'{"kind": "eval", "mean_return": 1.0}\n'),
        "metrics.jsonl (1 line)"),
    "an eval line without its return": (  # read, left out of the curves
        lambda f: append(f / "metrics.jsonl", b'{"kind": "eval", "env_steps": 300}\n'),
        None),
    "an event without env_steps": (
        lambda f: append(f / "events.jsonl",
                         b'{"rule": "catastrophic_reward", "action": "pause"}\n'),
        "events.jsonl (1 line)"),
    "a 0xFF byte in flow1.jsonl": (
        lambda f: append(f / "flow1.jsonl", b"\xff\xfe\n"), "flow1.jsonl (1 line)"),
    "env_steps 'abc' in status.json": (
        lambda f: edit_status(f, env_steps="abc"), "status.json fields env_steps"),
    "a waiting record without its time": (
        lambda f: edit_status(f, state="paused", waiting={"since": "noon"}),
        "status.json fields waiting"),
    "a stray heatmap_step_1000 (copy).png": (
        lambda f: (f / "heatmaps" / "heatmap_step_1000 (copy).png").write_bytes(b"x"),
        "heatmaps/heatmap_step_1000 (copy).png"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_run_files_are_read_around_in_one_line(trained_run, tmp_path, damage):
    folder = tmp_path / "logs" / "trained"
    shutil.copytree(trained_run.log_dir, folder)
    (folder / "heatmaps").mkdir(exist_ok=True)
    make, named = DAMAGES[damage]
    make(folder)
    for args in (["status", str(folder)], ["status", str(folder), "--json"],
                 ["diagnose", str(folder)], ["runs", "--log-dir", str(tmp_path / "logs")]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (args, result.output)
        assert "Traceback" not in result.output
        notes = [line for line in result.output.splitlines()
                 if line.startswith("unreadable, skipped:")]
        if args[0] != "runs" and named is not None:
            assert len(notes) == 1 and named in notes[0], (args, result.output)


@pytest.mark.parametrize("text", ["[]", "\xff", "{\"state\": "])
def test_a_status_json_that_is_no_object_is_one_line(trained_run, tmp_path, text):
    folder = tmp_path / "logs" / "trained"
    shutil.copytree(trained_run.log_dir, folder)
    (folder / "status.json").write_bytes(text.encode("latin-1"))
    for command in ("status", "pause"):
        result = CliRunner().invoke(cli, [command, str(folder)])
        assert result.exit_code == 2, result.output
        assert result.output.strip().splitlines() == [
            f"Error: '{folder / 'status.json'}' cannot be read as JSON (edited or damaged?); "
            "the run's checkpoints and logs are not affected"]
