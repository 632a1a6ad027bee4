"""A run across a local two-node Ray cluster (ray.cluster_utils.Cluster): it trains on
both nodes, pauses, resumes there and goes on past a runner killed with SIGKILL."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.workers.ray_start import STARTUP_TIMEOUT, init_ray
from rltrain.utils.io.checkpoint import load_checkpoint
from rltrain.utils.run.monitor import TrainingMonitor
from rltrain.utils.run.status import read_status

from conftest import kill_runner, runner_events, tiny_dict

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")


def start_two_nodes() -> cluster_utils.Cluster:
    """One CPU a node and one a runner (worker_cpus): a runner on each node. Started again
    where a node misses Ray's 30 s to start (a loaded machine)."""
    for attempt in range(3):
        cluster = cluster_utils.Cluster()
        try:
            cluster.add_node(num_cpus=1)  # the head
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            return cluster
        except Exception as exc:
            cluster.shutdown()
            if STARTUP_TIMEOUT not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def two_nodes():
    cluster = start_two_nodes()
    init_ray(ray, address=cluster.address, include_dashboard=False, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_a_run_spans_two_nodes_pauses_resumes_and_survives_a_killed_runner(
        tmp_path, two_nodes, monkeypatch):
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(tiny_dict(tmp_path, worker_chunk_steps=10,
                                                   worker_cpus=1)))
    log_dir = tmp_path / "logs" / "spread"
    original = TrainingMonitor.after_step
    killed: list[int] = []

    def pause_at_120_then_kill_at_200(self, env_steps):
        if env_steps == 120 and not (log_dir / "paused_once").exists():
            (log_dir / "paused_once").write_text("")
            (log_dir / "pause.request").write_text("test pause")
        if env_steps == 200 and not killed:
            killed.append(kill_runner(self.run.collector.runners[1]))
        return original(self, env_steps)

    monkeypatch.setattr(TrainingMonitor, "after_step", pause_at_120_then_kill_at_200)
    first = CliRunner().invoke(cli, ["train", "--config", str(config_file), "--workers", "2",
                                     "--run-name", "spread"])
    assert first.exit_code == 3, first.output
    status = read_status(log_dir / "status.json")
    nodes = {r["node"] for r in status["workers"]["runners"]}
    assert len(nodes) == 2 and nodes <= {n["NodeID"] for n in ray.nodes()}
    paused = tmp_path / "checkpoints/spread/paused_at_step_120.pt"
    second = CliRunner().invoke(cli, ["resume", "--checkpoint", str(paused)])
    assert second.exit_code == 0, second.output
    assert killed
    final = load_checkpoint(tmp_path / "checkpoints/spread/checkpoint_step_300.pt")
    assert final["trainer"]["counters"]["env_steps"] == final["buffer"]["size"] == 300
    lost = runner_events(log_dir)
    assert len(lost) == 1 and "env runner 1 was lost" in lost[0]["message"]
