"""`rltrain --help`, `status` and the other quick commands import neither torch nor
Gymnasium (their start-up time is measured in benchmarks/cli_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from rltrain.utils.config.schema import TrainConfig, config_to_dict

HEAVY = ("torch", "gymnasium", "tensorboard")

PROBE = """
import sys
from rltrain.scripts.cli import cli
try:
    cli({args!r}, standalone_mode=False)
finally:
    print("HEAVY=" + ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def run_cli(args: list[str], cwd) -> subprocess.CompletedProcess:
    code = PROBE.format(args=args, heavy=HEAVY)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def heavy_modules(done: subprocess.CompletedProcess) -> list[str]:
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")][-1]
    return [m for m in line.removeprefix("HEAVY=").split(",") if m]


def test_importing_the_cli_imports_no_torch():
    code = "import sys, rltrain.scripts.cli; print([m for m in %r if m in sys.modules])" % (
        HEAVY,)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture
def run_folder(tmp_path):
    run = tmp_path / "logs" / "tiny"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(config_to_dict(TrainConfig())))
    (run / "status.json").write_text(json.dumps({
        "run": "tiny", "state": "finished", "env_steps": 300, "max_timesteps": 300,
        "episodes": 1, "updates": 200, "latest_episode_return": -1200.0,
        "latest_eval": -1100.0, "best_eval": -1100.0, "best_eval_step": 300,
        "evals_since_best": 0, "evaluations": 3, "pause_reason": None,
        "latest_checkpoint": None, "pid": 0}))
    (run / "metrics.jsonl").write_text("")
    (run / "events.jsonl").write_text("")
    return tmp_path


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["status", "tiny"],
                                  ["runs"], ["config", "show"]])
def test_quick_commands_import_no_torch_nor_gymnasium(run_folder, args):
    done = run_cli(args, run_folder)
    assert done.returncode == 0, done.stderr
    assert heavy_modules(done) == []
    if args == ["status", "tiny"]:
        assert "finished" in done.stdout


# The `rltrain` command itself (scripts.main), with what it imported said at exit.
AT_EXIT = """
import atexit, sys
atexit.register(lambda: print("HEAVY=" + ",".join(m for m in {heavy!r} if m in sys.modules),
                              file=sys.stderr))
{body}
"""
REFUSED = "Error: config key 'learning_starts' (1000) must be below max_timesteps (1): no " \
          "update would run"


@pytest.mark.parametrize("body", [
    "from rltrain.scripts import main\nsys.argv = ['rltrain', 'train', '--steps', '1']\n"
    "main()",
    "import rltrain\ntry:\n    rltrain.train(max_timesteps=1)\n"
    "except rltrain.ConfigError as exc:\n    print('Error:', exc, file=sys.stderr)\n"
    "    sys.exit(2)"])
def test_a_config_refused_by_its_checks_imports_no_torch(tmp_path, body):
    """`rltrain train --steps 1` (learning_starts 1000 >= max_timesteps 1), and the API's
    `train`, refuse before torch is imported; the exit code and the line are the same."""
    code = AT_EXIT.format(heavy=HEAVY, body=body)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("HEAVY=")]
    assert lines[-1] == REFUSED and "Traceback" not in done.stderr
    assert "torch" not in heavy_modules(done)
    assert not (tmp_path / "logs").exists()
