"""An env whose constructor raises: one line naming the exception and where, exit code 5,
the traceback in a file that line names, for training (its evaluation env and its vector
envs, sync and async), `rltrain resume` and `rltrain eval`; no run folder is made and no
file of an existing run changes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.io.checkpoint import load_checkpoint, save_tensors

import fake_envs
from conftest import tiny_dict

RAISING = "fake_envs:FakeRaiseInitPendulum-v0"
LINE = fake_envs.RaiseInitPendulum.__init__.__code__.co_firstlineno + 4  # its `raise`


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_constructor_failure(result) -> None:
    assert result.exit_code == 5, result.output
    assert "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert (f"env '{RAISING}' raised RuntimeError in its constructor at fake_envs.py:{LINE} "
            "in __init__: simulator licence not found (traceback: ") in line, line
    trace = Path(re.search(r"\(traceback: ([^)]+)\)", line).group(1))
    assert trace.read_text().startswith("Traceback") and "licence not found" in trace.read_text()
    trace.unlink()


@pytest.mark.parametrize("fail_from, extra", [
    (1, {}),  # the evaluation env, made first
    (2, {"num_envs": 2}),  # the first training env of a sync vector env
])
def test_training_with_an_env_that_cannot_be_made(tmp_path, monkeypatch, fail_from, extra):
    monkeypatch.setattr(fake_envs.RaiseInitPendulum, "made", 0)
    monkeypatch.setattr(fake_envs.RaiseInitPendulum, "fail_from", fail_from)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path, env_name=RAISING, **extra)))
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "r"])
    assert_constructor_failure(result)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "checkpoints").exists()


def test_an_async_worker_whose_env_cannot_be_made(tmp_path, monkeypatch):
    """Made in this process, the env starts; in the workers, it raises."""
    monkeypatch.setenv("RLTRAIN_TEST_PARENT_PID", str(os.getpid()))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_dict(tmp_path, env_name=RAISING, num_envs=2,
                                               vector_mode="async")))
    result = CliRunner().invoke(cli, ["train", "--config", str(config), "--run-name", "r"])
    assert_constructor_failure(result)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "checkpoints").exists()


def forged(trained_run, tmp_path, name: str) -> Path:
    """A copy of the trained run's checkpoint `name` whose env is the raising one."""
    payload = load_checkpoint(trained_run.checkpoint_dir / name)
    payload["config"]["env_name"] = RAISING
    path = tmp_path / "checkpoints" / "trained" / name
    save_tensors(path, payload)
    return path


@pytest.mark.parametrize("command, name", [("eval", "best_model.pt"),
                                           ("resume", "checkpoint_step_200.pt")])
def test_eval_and_resume_of_a_run_whose_env_cannot_be_made(trained_run, tmp_path, command,
                                                           name):
    checkpoint = forged(trained_run, tmp_path, name)
    before = files_of(tmp_path)
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(checkpoint)])
    assert_constructor_failure(result)
    assert files_of(tmp_path) == before
