"""What the diagnostics keep stays bounded: the exploration-noise steps that
`ignored_action` judges after a short warm-up live in one block per field, allocated
once, never one object per step."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from rltrain.utils.diagnosis.measure.action_effect import ROWS, action_effect
from rltrain.utils.diagnosis.measure.inputs import Explored
from rltrain.utils.hooks.hook import Step
from rltrain.utils.training.replay_buffer import Batch


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
