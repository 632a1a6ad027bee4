"""What the diagnostics keep stays bounded: the exploration-noise steps that
`ignored_action` judges after a short warm-up live in one block per field, allocated
once, never one object per step; traces/ keeps the run's first trace and its newest
`keep_traces`, as checkpoints/ keeps its newest `keep_checkpoints`."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from rltrain.scripts.training.trainer import Trainer
from rltrain.utils.diagnosis.measure.action_effect import ROWS, action_effect
from rltrain.utils.diagnosis.measure.gradients import prune_traces
from rltrain.utils.diagnosis.measure.inputs import Explored
from rltrain.utils.hooks.hook import Step
from rltrain.utils.run.folders import create_run
from rltrain.utils.run.log_files import read_jsonl
from rltrain.utils.training.replay_buffer import Batch

from conftest import DEVICE, tiny_config


def noisy_steps(n: int, seed: int = 0) -> list[Step]:
    """Pendulum-shaped steps whose next observation moves with the noise."""
    rng = np.random.default_rng(seed)
    steps = []
    obs = rng.normal(size=3).astype(np.float32)
    for i in range(n):
        noise = rng.normal(size=1)
        steered = np.tanh(obs[:1]).astype(np.float32)
        action = np.clip(steered + 0.3 * noise, -2, 2).astype(np.float32)
        next_obs = (0.9 * obs + 0.1 * action[0]).astype(np.float32)
        steps.append(Step(i + 101, 0, obs, action, float(-obs @ obs), next_obs, False, False,
                          True, noise, steered))
        obs = next_obs
    return steps


def test_the_noise_steps_are_kept_in_one_block_allocated_once():
    steps = noisy_steps(ROWS)
    explored = Explored()
    explored.add(steps[0])
    gc.collect()
    tracked = len(gc.get_objects())
    for step in steps[1:]:
        explored.add(step)
    gc.collect()
    assert len(explored) == ROWS
    # Not one object per step and field (that was 6 tensors a step: 6000 here).
    assert len(gc.get_objects()) - tracked < 100
    with pytest.raises(AssertionError, match="full"):
        explored.add(steps[0])
    again = Explored()
    again.add(steps[0])
    blocks = {name: rows.ctypes.data for name, rows in again.arrays.items()}
    for step in steps[1:]:
        again.add(step)
    assert {name: rows.ctypes.data for name, rows in again.arrays.items()} == blocks
    assert all(rows.shape[0] == ROWS for rows in again.arrays.values())


def test_the_block_is_judged_and_checkpointed_as_the_steps_were_taken():
    steps = noisy_steps(ROWS, seed=1)
    explored = Explored()
    for step in steps:
        explored.add(step)

    def stacked(name: str) -> torch.Tensor:
        return torch.stack([torch.as_tensor(np.asarray(getattr(s, name), np.float64))
                            .reshape(-1) for s in steps])

    obs, actions, noise, steered, rewards, next_obs = map(stacked, Explored.FIELDS)
    expected = action_effect(Batch(obs, actions, rewards, next_obs, torch.zeros_like(rewards)),
                             1, noise, torch.cat([obs, steered], dim=1))
    assert explored.effect(1) == {**expected, "judged_on": "exploration noise"}
    restored = Explored()
    restored.load_state_dict(explored.state_dict())
    assert len(restored) == ROWS and restored.effect(1) == explored.effect(1)
    half = Explored()
    for step in steps[:400]:
        half.add(step)
    resumed = Explored()
    resumed.load_state_dict(half.state_dict())
    for step in steps[400:]:
        resumed.add(step)
    assert resumed.effect(1) == explored.effect(1)
    empty = Explored()
    empty.load_state_dict(Explored().state_dict())
    assert len(empty) == 0


def test_traces_are_kept_as_checkpoints_are_the_first_and_the_newest(tmp_path):
    """A return drop is traced at most once per heatmap_freq steps; with a hair trigger
    (trace_drop 0.001) and heatmap_freq 100 a 1000-step run traces several times, and
    traces/ keeps the run's first trace and its newest keep_traces, each both files."""
    config = tiny_config(tmp_path, run_name="traced", max_timesteps=1000,
                         diagnostics={"trace_drop": 0.001, "heatmap_freq": 100,
                                      "keep_traces": 2})
    Trainer(config, DEVICE, interactive=False).run(create_run(config))
    log_dir = tmp_path / "logs" / "traced"
    traced = [line["env_steps"] for line in read_jsonl(log_dir / "flow1.jsonl")
              if line["kind"] == "trace"]
    assert len(traced) >= 5, traced  # enough traces for the pruning to matter
    kept = [traced[0], *traced[-2:]]
    assert sorted(p.name for p in (log_dir / "traces").iterdir()) == sorted(
        name for step in kept
        for name in (f"grad_trace_step_{step}.json", f"critical_snapshot_step_{step}.pt"))


def test_prune_traces_leaves_other_files_alone(tmp_path):
    for step in (100, 300, 500, 700):
        (tmp_path / f"grad_trace_step_{step}.json").write_text("{}")
        (tmp_path / f"critical_snapshot_step_{step}.pt").write_bytes(b"")
    (tmp_path / "critical_snapshot_step_500.pt").unlink()  # a trace whose write failed
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "grad_trace_step_300 (copy).json").write_text("{}")
    prune_traces(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "critical_snapshot_step_100.pt", "critical_snapshot_step_700.pt",
        "grad_trace_step_100.json", "grad_trace_step_300 (copy).json",
        "grad_trace_step_700.json", "notes.txt"]
