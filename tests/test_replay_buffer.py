"""Replay buffer: storage, ring wrap, terminated vs truncated, sampling, state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.utils.errors import ConfigError
from rltrain.utils.training.replay_buffer import ReplayBuffer

from conftest import DEVICE

# Rows written straight into the storage exist on the CPU only; on CUDA they are staged.
STAGED = [False, True] if DEVICE.type == "cpu" else [True]


def fill(buffer: ReplayBuffer, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        obs = np.full(buffer.obs_dim, i, dtype=np.float32)
        buffer.add(obs, np.full(buffer.action_dim, -i, dtype=np.float32), float(i) / 10,
                   obs + 0.5, terminated=(i % 3 == 0), truncated=(i % 5 == 0))


def column(buffer: ReplayBuffer, name: str) -> torch.Tensor:
    return buffer.column(name).cpu()


@pytest.mark.parametrize("staged", STAGED)
def test_rows_hold_what_was_added(staged):
    buffer = ReplayBuffer(10, 3, 2, DEVICE, seed=0, staged=staged)
    fill(buffer, 4)
    obs = column(buffer, "obs")
    assert obs.dtype == torch.float32 and obs.shape == (4, 3)
    assert torch.equal(obs[:, 0], torch.arange(4.0))
    assert torch.equal(column(buffer, "actions")[:, 1], -torch.arange(4.0))
    assert torch.allclose(column(buffer, "rewards")[:, 0], torch.arange(4.0) / 10)
    assert torch.equal(column(buffer, "next_obs")[:, 2], torch.arange(4.0) + 0.5)


@pytest.mark.parametrize("staged", STAGED)
def test_ring_wraps_and_overwrites_the_oldest(staged):
    buffer = ReplayBuffer(5, 1, 1, DEVICE, seed=0, staged=staged)
    fill(buffer, 7)
    assert len(buffer) == 5 and buffer.ptr == 2
    assert column(buffer, "obs")[:, 0].tolist() == [5, 6, 2, 3, 4]


@pytest.mark.parametrize("staged", STAGED)
def test_rows_added_at_once_are_as_rows_added_one_by_one(staged):
    """`add_rows` (a vector step's transitions) writes what `add` of each in turn would:
    the same columns, ring pointer and truncation flags, across the ring's wrap."""
    one, many = (ReplayBuffer(5, 3, 2, DEVICE, seed=0, staged=staged) for _ in range(2))
    fill(one, 8)
    i = np.arange(8)
    obs = np.repeat(i[:, None], 3, axis=1).astype(np.float32)
    many.add_rows(obs[:3], -np.repeat(i[:3, None], 2, axis=1).astype(np.float32),
                  i[:3] / 10, obs[:3] + 0.5, i[:3] % 3 == 0, i[:3] % 5 == 0)
    many.add_rows(obs[3:], -np.repeat(i[3:, None], 2, axis=1).astype(np.float32),
                  i[3:] / 10, obs[3:] + 0.5, i[3:] % 3 == 0, i[3:] % 5 == 0)
    many.add_rows(obs[:0], obs[:0, :2], i[:0] / 10, obs[:0], i[:0] > 0, i[:0] > 0)
    assert (len(many), many.ptr) == (len(one), one.ptr) == (5, 3)
    for name in ("obs", "actions", "rewards", "next_obs", "terminated", "truncated"):
        assert torch.equal(column(many, name), column(one, name)), name


def test_staged_rows_that_wrap_the_ring_land_in_their_rows():
    """Staged rows are one run of consecutive ring rows, copied as slices: here 7, 8, 9,
    0, 1, 2 in one flush, and more adds between two samples than the ring holds."""
    buffer = ReplayBuffer(10, 3, 2, DEVICE, seed=0, staged=True)
    fill(buffer, 7)
    buffer.flush()
    fill(buffer, 6, start=7)
    assert column(buffer, "obs")[:, 0].tolist() == [10, 11, 12, 3, 4, 5, 6, 7, 8, 9]
    assert column(buffer, "truncated").tolist() == [i % 5 == 0 for i in
                                                    [10, 11, 12, 3, 4, 5, 6, 7, 8, 9]]
    fill(buffer, 25, start=13)  # 25 adds: two flushes on the way
    assert column(buffer, "obs")[:, 0].tolist() == [30, 31, 32, 33, 34, 35, 36, 37, 28, 29]


def test_terminated_is_kept_apart_from_truncated():
    buffer = ReplayBuffer(20, 1, 1, DEVICE, seed=0)
    fill(buffer, 16)
    ids = np.arange(16)
    assert column(buffer, "terminated")[:, 0].tolist() == list((ids % 3 == 0).astype(float))
    assert column(buffer, "truncated").tolist() == list(ids % 5 == 0)


def test_batches_are_float32_tensors_on_the_device_with_matching_columns():
    buffer = ReplayBuffer(100, 3, 2, DEVICE, seed=0)
    fill(buffer, 50)
    batch = buffer.sample(64)
    assert batch.obs.shape == (64, 3) and batch.actions.shape == (64, 2)
    assert batch.rewards.shape == (64, 1) and batch.terminated.shape == (64, 1)
    assert all(t.dtype == torch.float32 and t.device.type == DEVICE.type for t in batch)
    batch = batch._replace(**{name: t.cpu() for name, t in batch._asdict().items()})
    # Every sampled row is one consistent transition.
    i = batch.obs[:, 0]
    assert torch.equal(batch.actions[:, 0], -i)
    assert torch.allclose(batch.rewards[:, 0], i / 10)
    assert torch.equal(batch.next_obs[:, 0], i + 0.5)
    assert torch.equal(batch.terminated[:, 0], (i % 3 == 0).float())
    assert i.max() < 50


def test_sampling_is_seeded_and_state_round_trips():
    a = ReplayBuffer(100, 2, 1, DEVICE, seed=7)
    fill(a, 30)
    a.sample(8)
    b = ReplayBuffer(100, 2, 1, DEVICE, seed=99)
    state = a.state_dict()
    b.load_state_dict(state)
    assert torch.equal(a.sample(16).obs, b.sample(16).obs)
    fill(a, 3, start=30)
    fill(b, 3, start=30)
    assert torch.equal(a.sample(16).obs, b.sample(16).obs)


def test_state_holds_only_the_filled_part():
    buffer = ReplayBuffer(1_000_000, 3, 1, DEVICE, seed=0)
    fill(buffer, 10)
    state = buffer.state_dict()
    assert state["data"].shape == (10, buffer.width)
    assert state["data"].untyped_storage().nbytes() == 10 * buffer.width * 4


def test_a_capacity_the_device_cannot_hold_is_a_config_error():
    with pytest.raises(ConfigError, match=r"replay_buffer_size 1000000000000 needs 3.35e\+04 "
                                          "GiB of .* memory, which could not be allocated"):
        ReplayBuffer(10**12, 3, 1, DEVICE, seed=0)
    for capacity in (2**60, 10**20):  # beyond torch's size arithmetic: a traceback before
        with pytest.raises(ConfigError, match="could not be allocated here"):
            ReplayBuffer(capacity, 3, 1, DEVICE, seed=0)
