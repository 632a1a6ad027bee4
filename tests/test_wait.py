"""--wait: a paused run's process waits, holding the run, for `rltrain continue` (the same
weights as `rltrain resume` with the same changes) or `rltrain stop`, the wait timeout,
Ctrl-C or SIGTERM (exit code 3, the paused checkpoint resumable)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import yaml
from click.testing import CliRunner
from webhook import Webhook

from rltrain.scripts.cli import cli
from rltrain.scripts.training.run_state import check_resumable
from rltrain.utils.errors import UserError
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.folders import RunLock, RunPaths
from rltrain.utils.run.log_files import read_jsonl

from conftest import TESTS_DIR, tiny_dict

EXE = str(Path(sys.executable).with_name("rltrain"))
ENV = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
ENV["PYTHONPATH"] = str(TESTS_DIR)
PAUSED = "paused_at_step_200.pt"  # Pendulum's first episode is below min_reward_threshold 0
STATE_KEYS = ("actor", "critic", "actor_target", "critic_target", "actor_optimizer",
              "critic_optimizer")


def start(tmp_path: Path, *extra: str, **overrides) -> subprocess.Popen:
    raw = tiny_dict(tmp_path, **{"max_timesteps": 400, "min_reward_threshold": 0.0,
                                 "torch_threads": 1, "diagnostics": {"enabled": False},
                                 **overrides})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    return subprocess.Popen([EXE, "train", "--config", "c.yaml", "--run-name", "live", *extra],
                            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def waiting(tmp_path: Path, proc: subprocess.Popen, timeout: float = 60) -> dict:
    """status.json once the run waits after its pause."""
    path = tmp_path / "logs" / "live" / "status.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            status = {}
        if status.get("waiting"):
            return status
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the run did not wait: {proc.communicate()[0]}")


def rltrain(tmp_path: Path, *args: str):
    """A command of the CLI in this process, from the run's folder."""
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(cli, list(args))
    finally:
        os.chdir(here)


def final_state(path: Path) -> dict:
    payload = load_checkpoint(path)
    return {key: payload[key] for key in STATE_KEYS}


def assert_same(a, b) -> None:
    """Equal tensors (bit for bit), numbers and containers, recursively."""
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


def test_continue_with_a_change_trains_on_as_resume_with_it_does_bit_for_bit(tmp_path):
    with Webhook() as hook:
        proc = start(tmp_path, "--wait", "--set", f"notify.url={hook.url()}")
        waiting(tmp_path, proc)
        [event] = hook.wait_for(1)
        assert event["event"] == "pause" and event["waiting"] is True
        assert event["answer_with"] == ["rltrain continue live [--set KEY=VALUE ...]",
                                        "rltrain stop live"]
        text = rltrain(tmp_path, "status", "live").output
        assert "paused, waiting for instruction since" in text and "rltrain stop live" in text
        for bad, says in [("seed=5", "cannot change 'seed' on resume"),
                          ("critic_lr=-1", "critic_lr' must be a number > 0")]:
            refused = rltrain(tmp_path, "continue", "live", "--set", bad)
            assert refused.exit_code == 2 and says in refused.output, refused.output
            assert len(refused.output.strip().splitlines()) == 1
        changes = ("--set", "critic_lr=1e-4", "--set", "min_reward_threshold=-1e9")
        answered = rltrain(tmp_path, "continue", "live", *changes)
        assert answered.exit_code == 0, answered.output
        assert "continues from step 200" in answered.output
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "finished at step 400" in out, out
    [resumed] = [e for e in read_jsonl(tmp_path / "logs" / "live" / "events.jsonl")
                 if e["action"] == "resume"]
    assert resumed["value"] == ["critic_lr=1e-4", "min_reward_threshold=-1e9"]
    assert "rltrain continue live --set critic_lr=1e-4" in \
        (tmp_path / "logs" / "live" / "command.txt").read_text()
    fork = rltrain(tmp_path, "resume", "--checkpoint", f"checkpoints/live/{PAUSED}",
                   "--run-name", "fork", *changes)
    assert fork.exit_code == 0, fork.output
    assert_same(final_state(tmp_path / "checkpoints" / "live" / "checkpoint_step_400.pt"),
                final_state(tmp_path / "checkpoints" / "fork" / "checkpoint_step_400.pt"))


def end_by(how: str, proc: subprocess.Popen, tmp_path: Path) -> None:
    if how == "stop":
        stopped = rltrain(tmp_path, "stop", "live")
        assert stopped.exit_code == 0 and "stopped waiting" in stopped.output, stopped.output
    elif how in ("SIGTERM", "SIGINT"):
        proc.send_signal(getattr(signal, how))


@pytest.mark.parametrize("how, says", [
    ("stop", "stopped by `rltrain stop`"),
    ("timeout", "no instruction within wait_timeout"),
    ("SIGTERM", "SIGTERM received while waiting"),
    ("SIGINT", "SIGINT received while waiting"),
])
def test_stop_the_timeout_and_signals_end_the_wait_with_exit_3(tmp_path, how, says):
    proc = start(tmp_path, *(() if how == "timeout" else ("--wait",)),
                 on_pause="wait", wait_timeout=2.0 if how == "timeout" else 60.0)
    status = waiting(tmp_path, proc)
    paths = RunPaths("live", tmp_path / "logs" / "live", tmp_path / "checkpoints" / "live")
    with pytest.raises(UserError, match="is paused and its process waits for an instruction"
                                        r" \(pid \d+\): rltrain continue live"):
        RunLock(paths)  # the waiting process holds the run
    if how == "stop":  # resume says what to do instead; waiting costs no CPU
        refused = rltrain(tmp_path, "resume", "--checkpoint",
                          str(tmp_path / "checkpoints" / "live" / PAUSED))
        assert refused.exit_code == 2 and "rltrain continue live" in refused.output
        cpu = psutil.Process(proc.pid)
        before = sum(cpu.cpu_times()[:2])
        time.sleep(1.0)
        assert sum(cpu.cpu_times()[:2]) - before < 0.05
    end_by(how, proc, tmp_path)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, out
    assert f"no longer waiting: {says}" in out and "resume with: rltrain resume" in out
    # While it waited, the hint was the waiting process's answers, not a resume
    assert out.index("waiting for an instruction") < out.index("resume with:")
    checkpoint = tmp_path / "checkpoints" / "live" / PAUSED
    assert status["waiting"]["checkpoint"] == str(checkpoint)
    check_resumable(load_checkpoint(checkpoint), str(checkpoint))
    after = json.loads(rltrain(tmp_path, "status", "live", "--json").output)
    assert after["state"] == "paused" and after["waiting"] is None
    RunLock(paths).release()  # given back
    not_waiting = rltrain(tmp_path, "continue", "live")
    assert not_waiting.exit_code == 2 and "is not waiting" in not_waiting.output
    if how == "SIGTERM":
        resumed = rltrain(tmp_path, "resume", "--checkpoint", str(checkpoint),
                          "--set", "min_reward_threshold=-1e9")
        assert resumed.exit_code == 0 and "finished at step 400" in resumed.output


def test_concurrent_pauses_of_a_waiting_run_answer_alike(tmp_path):
    """Three `rltrain pause` at once: whichever the run took, each says it is paused and
    waits for `rltrain continue`, with exit code 0."""
    proc = start(tmp_path, "--wait", min_reward_threshold=None, max_timesteps=100_000)
    status_file = tmp_path / "logs" / "live" / "status.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads(status_file.read_text()).get("env_steps", 0) >= 120:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    pauses = [subprocess.Popen([EXE, "pause", "live"], cwd=tmp_path, env=ENV, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
              for _ in range(3)]
    answers = [(p.wait(timeout=120), p.stdout.read()) for p in pauses]
    try:
        for code, out in answers:
            assert code == 0, out
            assert "the run waits: rltrain continue live" in out, out
    finally:
        rltrain(tmp_path, "stop", "live")
        proc.communicate(timeout=60)
    assert proc.returncode == 3


def test_continue_and_stop_given_at_once_tell_which_one_the_run_took(tmp_path):
    """Both said they were obeyed (exit 0), and the run trained on: the later request
    replaced the earlier before the run read it."""
    from rltrain.scripts.commands.wait_commands import _taken
    from rltrain.scripts.training.wait import write_instruction

    proc = start(tmp_path, "--wait")
    since = waiting(tmp_path, proc)["waiting"]["since"]
    folder = tmp_path / "logs" / "live"
    request = folder / "instruction.request"
    earlier = write_instruction(request, "continue")
    later = write_instruction(request, "stop")  # before the run polls again
    _taken(folder, since, later, timeout=60)  # taken
    with pytest.raises(UserError, match=r"another instruction given at the same time "
                                        r"reached the run first: it stopped waiting \(`stop`\)"
                                        r"; this one was not taken"):
        _taken(folder, since, earlier, timeout=60)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, out
