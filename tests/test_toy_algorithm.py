"""An algorithm registered from outside rltrain (tests/toy_algorithm.py) trains, pauses,
resumes bit for bit, evaluates and is diagnosed, with no file of rltrain naming it.

Each command runs in a process of its own that imports the toy module first (its entry
must be registered before rltrain's config is imported); this process reads the
checkpoints with torch alone, since its own registry does not know the toy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

from rltrain.utils.run.log_files import read_jsonl

from conftest import TESTS_DIR, tiny_dict

RUN_WITH_TOY = ("import sys, toy_algorithm; from rltrain.scripts import main; "
                "sys.argv[0] = 'rltrain'; main()")


def rltrain(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", RUN_WITH_TOY, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def saved(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def metrics(path: Path) -> list[dict]:
    lines = [x for x in read_jsonl(path) if x["kind"] != "resume"]
    for line in lines:
        line.pop("time")
    return lines


def test_a_toy_algorithm_from_a_test_module_runs_everywhere(tmp_path):
    raw = tiny_dict(tmp_path, algo="toy", toy={"actor_every": 2}, checkpoint_freq=50,
                    keep_checkpoints=100)
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(raw))
    full = rltrain("train", "--config", "toy.yaml", "--run-name", "full", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    # The catastrophic-reward rule pauses the same run at its first episode's end.
    paused = rltrain("train", "--config", "toy.yaml", "--run-name", "split", "--set",
                     "min_reward_threshold=0", cwd=tmp_path)
    assert paused.returncode == 3, paused.stderr
    checkpoints = tmp_path / "checkpoints"
    pause = checkpoints / "split" / "paused_at_step_200.pt"
    assert saved(pause)["algo"] == "toy" and "critic_target" not in saved(pause)
    resumed = rltrain("resume", "--checkpoint", str(pause), "--set",
                      "min_reward_threshold=null", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr

    a, b = (saved(checkpoints / run / "checkpoint_step_300.pt") for run in ("full", "split"))
    for key in ("actor", "critic"):
        assert all(torch.equal(a[key][name], b[key][name]) for name in a[key]), key
    for key in ("actor_optimizer", "critic_optimizer"):
        for index, state in a[key]["state"].items():
            assert all(torch.equal(v, b[key]["state"][index][k]) for k, v in state.items())
    assert a["updates"] == b["updates"] == 201  # one per env step from step 100 to 300
    assert torch.equal(a["buffer"]["data"], b["buffer"]["data"])
    logs = tmp_path / "logs"
    assert metrics(logs / "split" / "metrics.jsonl") == metrics(logs / "full" / "metrics.jsonl")

    evaluated = rltrain("eval", "--checkpoint", str(checkpoints / "full" / "best_model.pt"),
                        "--episodes", "1", cwd=tmp_path)
    assert evaluated.returncode == 0 and "mean return" in evaluated.stdout, evaluated.stderr
    diagnosed = rltrain("diagnose", str(logs / "split"), "--json", cwd=tmp_path)
    assert diagnosed.returncode == 0, diagnosed.stderr
    report = json.loads(diagnosed.stdout)
    assert "catastrophic_reward" in {f["rule"] for f in report["findings"]}
    assert (logs / "split" / "report.html").is_file()
