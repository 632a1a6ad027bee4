"""Losing the Ray head for real: a `ray start --head` cluster in its own processes, a run
joined to it as a Ray Client with two env runners, the head's processes killed. The run
stops with exit code 5, one line naming the lost cluster and a checkpoint, which resumes
with runners on this machine."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml

from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.log_files import read_jsonl

from conftest import TESTS_DIR, tiny_dict

pytest.importorskip("ray")

BIN = Path(sys.executable).parent
# A cluster of this test's own, open to any client on this machine: no token. The client
# gives up on a lost head after 3 s instead of 30. No gRPC fork handlers: the head's
# client proxy forks and execs a server per client, and Ray's open bug 63202 (that
# server dying in the fork, "Starting Ray client server failed") struck here too.
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_CLIENT_RECONNECT_GRACE_PERIOD": "3",
       "GRPC_ENABLE_FORK_SUPPORT": "false",
       "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
CLIENT_SERVER_FAILED = "Starting Ray client server failed"  # Ray's bug, not the run's
STARTUP_TIMEOUT = "timed out during startup"  # Ray's node missed its 30 s to register


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_processes(marks: tuple[str, ...]) -> list[psutil.Process]:
    """The processes of this test's cluster: each names its temp dir (`marks[0]`) or ends
    an argument with its head's address or client port (the Ray Client's proxy and
    servers)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            args = proc.info["cmdline"] or ()
            if any(marks[0] in arg or arg.endswith(marks[1:]) for arg in args):
                found.append(proc)
    return found


def kill_cluster(marks: tuple[str, ...]) -> int:
    """SIGKILL every process of the cluster, as when its machine goes away."""
    procs = cluster_processes(marks)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=30)
    return len(procs)


def start_run(tmp_path: Path, address: str, steps: int) -> subprocess.Popen:
    """`rltrain train` with two runners joined to `address`, once its status.json
    passes `steps`. Started a second time only if the cluster's client server failed
    to start for it (CLIENT_SERVER_FAILED: the run stopped before making its folders)."""
    proc, failure = try_run(tmp_path, address, steps)
    if proc is None and CLIENT_SERVER_FAILED in failure:
        proc, failure = try_run(tmp_path, address, steps)
    assert proc is not None, failure
    return proc


def try_run(tmp_path: Path, address: str, steps: int,
            timeout: float = 300) -> tuple[subprocess.Popen | None, str]:
    """The running process, or None and why (its exit code and output)."""
    proc = subprocess.Popen(
        [str(BIN / "rltrain"), "train", "--config", "c.yaml", "--workers", "2",
         "--set", f"ray_address={address}", "--run-name", "live"],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status_file = tmp_path / "logs" / "live" / "status.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(status_file.read_text())["env_steps"] >= steps:
                return proc, ""
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    return None, (f"the run did not reach {steps} steps (exit code {proc.returncode}):\n"
                  f"{out}\n{err[-3000:]}")


@pytest.fixture
def ray_head():
    """A head node on free ports; its Ray Client address. A short temp dir: Ray's
    sockets live under it, and a socket's path has at most 107 characters."""
    temp_dir = tempfile.mkdtemp(prefix="rltrain_ray_", dir="/tmp")
    client_port, head_port = free_port(), free_port()
    marks = (temp_dir, f":{head_port}", f"--port={client_port}")
    for _ in range(3):  # Ray's node has 30 s to start, which a loaded machine can miss
        started = subprocess.run(
            [str(BIN / "ray"), "start", "--head", f"--port={head_port}",
             f"--ray-client-server-port={client_port}", "--num-cpus=2",
             f"--temp-dir={temp_dir}", "--include-dashboard=false", "--disable-usage-stats"],
            env=ENV, capture_output=True, text=True, timeout=180)
        if started.returncode == 0 or STARTUP_TIMEOUT not in started.stdout + started.stderr:
            break
        kill_cluster(marks)  # what the failed start left
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield f"ray://127.0.0.1:{client_port}", marks
    finally:
        kill_cluster(marks)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_losing_the_head_stops_the_run_with_a_checkpoint_that_resumes_locally(
        tmp_path, ray_head):
    address, cluster = ray_head
    raw = tiny_dict(tmp_path, max_timesteps=100_000, eval_freq=10_000, checkpoint_freq=10_000,
                    worker_chunk_steps=7, replay_buffer_size=100_000)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    proc = start_run(tmp_path, address, 201)
    try:
        assert kill_cluster(cluster) > 0
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 5, out + err
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and f"the Ray cluster at {address} was lost" in lines[0], err
    assert "rltrain resume --checkpoint" in lines[0] and "ray_address=null" in lines[0]
    [paused] = (tmp_path / "checkpoints/live").glob("paused_at_step_*.pt")
    state = load_checkpoint(paused)
    step = state["total_steps"]
    assert step > 200 and state["buffer"]["size"] == step
    saved = state["trainer"]["workers"]
    assert saved["runners"] == [None, None] and saved["weights"] is not None
    [event] = [e for e in read_jsonl(tmp_path / "logs/live/events.jsonl")
               if e.get("rule") == "ray_cluster"]
    assert event["action"] == "pause"

    resumed = subprocess.run(
        [str(BIN / "rltrain"), "resume", "--checkpoint", str(paused), "--set",
         "ray_address=null", "--set", f"max_timesteps={step + 60}"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"finished at step {step + 60}" in resumed.stdout
    final = load_checkpoint(tmp_path / f"checkpoints/live/checkpoint_step_{step + 60}.pt")
    assert final["buffer"]["size"] == step + 60
    assert all(r is not None for r in final["trainer"]["workers"]["runners"])


def test_a_cluster_that_cannot_be_joined_is_refused_in_one_line(tmp_path, monkeypatch):
    import ray
    from click.testing import CliRunner

    from rltrain.scripts.cli import cli

    def unreachable(**kwargs):  # what ray.init raises when no cluster answers
        raise ConnectionError(f"Failed to connect to Ray cluster at {kwargs['address']}")

    monkeypatch.setattr(ray, "init", unreachable)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tiny_dict(tmp_path)))
    result = CliRunner().invoke(cli, ["train", "--config", str(tmp_path / "c.yaml"),
                                      "--workers", "2", "--set", "ray_address=10.0.0.1:6379"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "Error: could not join the Ray cluster at ray_address '10.0.0.1:6379': Failed to "
        "connect to Ray cluster at 10.0.0.1:6379")
