"""A run's environment (library versions, threads, device, CPU instruction set) is recorded
in every checkpoint, and a resume on another one says that bit-exactness is not promised."""

from __future__ import annotations

import platform

import gymnasium
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.environment import FIELDS, environment_record, environment_warning
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl

from conftest import DEVICE, tiny_config

NOT_PROMISED = "bit-exact continuation cannot be promised"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a file outside its run's folders forks into ./logs


@pytest.fixture
def checkpoints(tmp_path):
    """A finished 200-step run 'base' with checkpoints at 100 and 200 and a best model."""
    config = tiny_config(tmp_path, run_name="base", max_timesteps=200)
    assert Trainer(config, DEVICE, interactive=False).run(create_run(config)).status == \
        "finished"
    return tmp_path / "checkpoints" / "base"


def fork(checkpoint, name: str):
    result = CliRunner().invoke(cli, ["resume", "--checkpoint", str(checkpoint),
                                      "--run-name", name])
    assert result.exit_code == 0, result.output
    return result


def resume_warnings(tmp_path, name: str) -> list[str]:
    return [e["message"] for e in read_jsonl(tmp_path / "logs" / name / "events.jsonl")
            if e["rule"] == "resume" and e.get("action") == "warn"]


def test_every_checkpoint_records_the_environment(checkpoints):
    for name in ("checkpoint_step_100.pt", "checkpoint_step_200.pt", "best_model.pt"):
        record = load_checkpoint(checkpoints / name)["environment"]
        assert record == environment_record(DEVICE)
        assert set(record) == set(FIELDS)
        assert record["torch"] == torch.__version__ and record["numpy"] == np.__version__
        assert record["gymnasium"] == gymnasium.__version__
        assert record["python"] == platform.python_version()
        assert record["torch_threads"] == torch.get_num_threads()
        assert record["device"] == DEVICE.type and record["cpu_capability"]


def test_a_resume_on_another_torch_and_thread_count_warns_naming_them(
        tmp_path, checkpoints, monkeypatch):
    saved = load_checkpoint(checkpoints / "checkpoint_step_100.pt")["environment"]
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    monkeypatch.setattr(torch, "get_num_threads", lambda: saved["torch_threads"] + 5)
    result = fork(checkpoints / "checkpoint_step_100.pt", "moved")
    lines = [line for line in result.output.splitlines() if NOT_PROMISED in line]
    assert len(lines) == 1, result.output
    assert f"torch {saved['torch']} -> 9.9.9" in lines[0]
    assert f"torch_threads {saved['torch_threads']} -> {saved['torch_threads'] + 5}" in lines[0]
    assert "numpy" not in lines[0] and "python" not in lines[0]
    assert result.output.index(NOT_PROMISED) < result.output.index("finished")
    warnings = resume_warnings(tmp_path, "moved")
    assert len(warnings) == 1 and "torch_threads" in warnings[0] and NOT_PROMISED in warnings[0]
    assert (tmp_path / "checkpoints" / "moved" / "checkpoint_step_200.pt").exists()


def test_the_same_environment_resumes_without_a_warning(tmp_path, checkpoints):
    result = fork(checkpoints / "checkpoint_step_100.pt", "same")
    assert NOT_PROMISED not in result.output and resume_warnings(tmp_path, "same") == []


def test_an_old_checkpoint_without_the_record_resumes_silently(tmp_path, checkpoints):
    payload = load_checkpoint(checkpoints / "checkpoint_step_100.pt")
    del payload["environment"]
    torch.save(payload, tmp_path / "old.pt")
    result = fork(tmp_path / "old.pt", "old")
    assert NOT_PROMISED not in result.output and "environment" not in result.output
    assert resume_warnings(tmp_path, "old") == []


@pytest.mark.parametrize("forged", ["cpu", [1, 2], {"torch": 2}, {"torch_threads": "4"},
                                    {"torch_threads": True}, {3: "x"}])
def test_a_forged_record_is_ignored_in_one_line(tmp_path, checkpoints, forged):
    payload = load_checkpoint(checkpoints / "checkpoint_step_100.pt")
    payload["environment"] = forged
    torch.save(payload, tmp_path / "forged.pt")
    result = fork(tmp_path / "forged.pt", "forged")
    assert result.output.count("environment record unreadable") == 1, result.output
    assert "Traceback" not in result.output and NOT_PROMISED not in result.output


def test_the_warning_names_each_difference_and_nothing_else():
    current = environment_record(torch.device("cpu"))
    saved = {**current, "numpy": "1.0.0", "cpu_capability": "NO_AVX", "device": "cuda"}
    warning = environment_warning(saved, current)
    assert warning is not None and NOT_PROMISED in warning and "\n" not in warning
    assert f"numpy 1.0.0 -> {current['numpy']}" in warning
    assert f"cpu_capability NO_AVX -> {current['cpu_capability']}" in warning
    assert "device cuda -> cpu" in warning and "torch " not in warning
    assert environment_warning(current, current) is None
    assert environment_warning(None, current) is None
