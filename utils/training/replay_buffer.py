"""Replay buffer: preallocated float32 ring storage on the training device.

One row per transition holds obs | action | reward | next_obs | terminated, so a batch is
one gather plus free column views. `terminated` (the task really ended: do not
bootstrap) is stored apart from `truncated` (a time limit cut the episode: bootstrap).
On the CPU, `add` writes straight into the storage through a NumPy view of it; on CUDA,
rows are staged in host memory and copied over in one transfer before the next sample
(staged rows are consecutive ring rows: they land as one or two slice copies).
Sampling uses the buffer's own `torch.Generator`, whose state goes into checkpoints.
Storage is allocated with `torch.empty`: on the CPU, untouched capacity costs no resident
memory (pages are mapped on first write); on CUDA the whole capacity is allocated at
once. Checkpoints hold only the filled part.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from rltrain.utils.errors import ConfigError
from rltrain.utils.seeding import load_generator_state


class Batch(NamedTuple):
    obs: torch.Tensor  # [B, obs_dim]
    actions: torch.Tensor  # [B, action_dim], in env units
    rewards: torch.Tensor  # [B, 1]
    next_obs: torch.Tensor  # [B, obs_dim]
    terminated: torch.Tensor  # [B, 1], 1.0 where the episode truly ended (no bootstrap)


def _storage(capacity: int, width: int, device: torch.device) -> torch.Tensor:
    gib = capacity * width * 4 / 2**30
    too_big = ConfigError(f"replay_buffer_size {capacity} needs {gib:.3g} GiB of {device.type} "
                          "memory, which could not be allocated here; lower it")
    if capacity * width * 4 >= 2**62:  # beyond any machine (and torch's size arithmetic)
        raise too_big
    try:
        return torch.empty((capacity, width), dtype=torch.float32, device=device)
    except RuntimeError as exc:  # torch.OutOfMemoryError on CUDA, a RuntimeError on the CPU
        if "alloc" not in str(exc).lower() and not isinstance(exc, torch.OutOfMemoryError):
            raise
        raise too_big from None


class ReplayBuffer:
    """A fixed-capacity ring of transitions, sampled uniformly with replacement."""

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, device: torch.device,
                 seed: int, staged: bool | None = None) -> None:
        self.capacity = capacity
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = device
        self.width = 2 * obs_dim + action_dim + 2
        self._data = _storage(capacity, self.width, device)
        self._truncated = np.zeros(capacity, dtype=bool)
        self.ptr = 0  # next row to write
        self.size = 0  # filled rows
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.staged = device.type != "cpu" if staged is None else staged
        if self.staged:
            # Rows for ring rows _stage_start, _stage_start + 1, ... (at most `capacity`
            # of them, so the run of rows wraps the ring at most once).
            self._stage = np.empty((min(1024, capacity), self.width), dtype=np.float32)
            self._stage_start = self._staged = 0
        else:
            self._view = self._data.numpy()  # shares memory with the storage
        o, a = obs_dim, action_dim
        self._cols = {"obs": slice(0, o), "actions": slice(o, o + a),
                      "rewards": slice(o + a, o + a + 1),
                      "next_obs": slice(o + a + 1, 2 * o + a + 1),
                      "terminated": slice(2 * o + a + 1, 2 * o + a + 2)}
        assert list(self._cols) == list(Batch._fields)
        self._widths = [c.stop - c.start for c in self._cols.values()]

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, action: np.ndarray, reward: float, next_obs: np.ndarray,
            terminated: bool, truncated: bool) -> None:
        """Store one transition; `next_obs` is the true final obs when the episode ended."""
        if self.staged:
            if self._staged == len(self._stage):
                self.flush()
            if self._staged == 0:
                self._stage_start = self.ptr
            row = self._stage[self._staged]
            self._staged += 1
        else:
            row = self._view[self.ptr]
        c = self._cols
        row[c["obs"]] = obs
        row[c["actions"]] = action
        row[c["rewards"]] = reward
        row[c["next_obs"]] = next_obs
        row[c["terminated"]] = float(terminated)
        self._truncated[self.ptr] = truncated
        self.ptr = (self.ptr + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_rows(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray,
                 next_obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                 kept: np.ndarray | None = None) -> None:
        """Store k transitions at once, as `add` of each row in turn (row i of every
        array: one transition); where `kept` is given, only its True rows (a vector
        step's finite ones)."""
        if kept is not None and not all(kept.tolist()):
            obs, action, reward, next_obs, terminated, truncated = (
                np.asarray(column)[kept]
                for column in (obs, action, reward, next_obs, terminated, truncated))
        k = len(reward)
        if k == 0:
            return
        if self.staged or k > self.capacity:
            for i in range(k):
                self.add(obs[i], action[i], float(reward[i]), next_obs[i],
                         bool(terminated[i]), bool(truncated[i]))
            return
        start = self.ptr
        # consecutive ring rows: a slice where they do not wrap (the usual case, faster)
        rows = (slice(start, start + k) if start + k <= self.capacity
                else (start + np.arange(k)) % self.capacity)
        view, c = self._view, self._cols
        view[rows, c["obs"]] = np.reshape(obs, (k, -1))
        view[rows, c["actions"]] = np.reshape(action, (k, -1))
        view[rows, c["rewards"]] = np.reshape(reward, (k, 1))
        view[rows, c["next_obs"]] = np.reshape(next_obs, (k, -1))
        view[rows, c["terminated"]] = np.reshape(terminated, (k, 1))
        self._truncated[rows] = truncated
        self.ptr = (start + k) % self.capacity
        self.size = min(self.size + k, self.capacity)

    def flush(self) -> None:
        """Copy staged rows to the device storage (no-op when writing in place)."""
        if not self.staged or not self._staged:
            return
        n, start = self._staged, self._stage_start
        rows = torch.from_numpy(self._stage[:n]).to(self.device)  # one host-to-device copy
        first = min(n, self.capacity - start)  # the rest wraps to the ring's start
        self._data[start:start + first].copy_(rows[:first])
        if first < n:
            self._data[:n - first].copy_(rows[first:])
        self._staged = 0

    def sample(self, batch_size: int) -> Batch:
        assert self.size > 0, "sample() from an empty replay buffer"
        self.flush()
        idx = torch.randint(0, self.size, (batch_size,), device=self.device,
                            generator=self.generator)
        return self._batch(idx)

    def newest(self, n: int) -> Batch:
        """The `n` most recently added transitions (no random draw)."""
        assert self.size > 0
        self.flush()
        n = min(n, self.size)
        return self._batch(torch.arange(self.ptr - n, self.ptr, device=self.device)
                           % self.capacity)

    def _batch(self, idx: torch.Tensor) -> Batch:
        # One gather and one split into the column views (Batch's fields are the columns
        # in storage order): fewer ops than indexing each column and slicing five times.
        rows = torch.index_select(self._data, 0, idx)  # [B, width]
        return Batch(*rows.split(self._widths, dim=1))

    def column(self, name: str) -> torch.Tensor:
        """The filled part of one column (`obs`, `actions`, ...), or `truncated`."""
        self.flush()
        if name == "truncated":
            return torch.from_numpy(self._truncated[:self.size].copy())
        return self._data[:self.size, self._cols[name]]

    def state_dict(self) -> dict[str, Any]:
        """Only the filled rows: checkpoint size grows with the data, not the capacity."""
        self.flush()
        return {"data": self._data[:self.size].to("cpu", copy=True),
                "truncated": torch.from_numpy(self._truncated[:self.size].copy()),
                "ptr": self.ptr, "size": self.size, "capacity": self.capacity,
                "width": self.width, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore the rows and the sampling stream; returns whether the stream continues
        (False for a checkpoint from the other kind of device: see `load_generator_state`)."""
        assert state["capacity"] == self.capacity and state["width"] == self.width
        size = int(state["size"])
        self._data[:size].copy_(state["data"])
        self._truncated[:size] = state["truncated"].numpy()
        self.ptr, self.size = int(state["ptr"]), size
        if self.staged:
            self._staged = 0
        return load_generator_state(self.generator, state["generator"])
