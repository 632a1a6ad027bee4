"""What a plain loop's batches hold, against what its env gave: two code faults that only
the loop's own replay buffer shows.

The Watcher sees every env step (`after_env_step`) and keeps, for the newest `KEPT`
steps, each observation's step and what followed it (hashes of the float32 bytes). Every
`EVERY` updates it arms forward pre-hooks on the critic and the target critic; the
loop's next update calls them with its batch (the target critic with the next
observations, the critic with the observations and actions), and the hooks keep those
inputs. Of the batch's rows whose observation the env gave:

- `unknown`: the share of rows whose observation the env never gave, where others it
  did (rows never written, read from a buffer's zeros; an index past the filled part);
- `mismatch`: of the known rows, the share whose next observation (the target critic's
  input, row by row) is not the one that followed it in the env (the observation stored
  as its own next one, rows shifted against each other);
- `age_ratio`: the mean age (env steps since the row's step) of the known rows over the
  mean age uniform sampling from the rows the buffer holds would give: near 1 for
  uniform replay, near 0 for batches drawn from the newest rows only.

Where the loop hands its batch to `Watcher.after_update` (`batch={"obs": ..., "dones":
...}`), its rows stored as done are looked up at every update (`done_rows`): how many of
them the env ended by a time limit only (`truncated`, not `terminated`), by the task
(`terminated`), or not at all (`ended_rows`, counted since the watch began). A loop that
stores `done = terminated or truncated` does not bootstrap at its time limits.

A loop whose critic sees transformed observations (normalised, stacked) matches no row:
nothing is judged then. The Watcher's own calls of the critic (its evaluations, probes)
are not captured, nor the loop's calls on as many rows as it has envs: those act on the
envs' observations (a DQN loop's greedy choice, a PPO loop's values of its rollout).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.utils.errors import ConfigError
from rltrain.utils.hooks.agent_view import ENDINGS

KEPT = 200_000  # newest env steps whose observations are remembered
EVERY = 250  # updates between two captures
# How the env steps with an observation ended their episode, as bits (an observation met
# again, a grid cell say, keeps every way it ended: terminated once is never a time limit)
CONTINUED, TERMINATED, TRUNCATED = 0, 1, 2


def _key(row: np.ndarray) -> int:
    return hash(np.ascontiguousarray(row, dtype=np.float32).tobytes())


class SampledBatches:
    """The env's steps, the loop's captured batches, and their statistics."""

    def __init__(self, critic: nn.Module, critic_target: nn.Module | None, obs_dim: int,
                 capacity: int, num_envs: int = 1) -> None:
        self.obs_dim, self.capacity, self.num_envs = obs_dim, capacity, num_envs
        # obs -> (its step, the next observation's key, how that step ended)
        self.seen: OrderedDict[int, tuple[int, int, int]] = OrderedDict()
        # the loop's rows stored as done, by how the env ended their step
        self.ended_rows = dict.fromkeys(ENDINGS, 0)
        self.steps = 0
        self.armed = False
        self.suspended = 0  # >0 while the Watcher calls the critic itself
        self.obs: torch.Tensor | None = None
        self.next_obs: torch.Tensor | None = None
        self.newest: dict[str, Any] | None = None  # the latest capture's statistics
        self.measured = 0
        self.handles = [critic.register_forward_pre_hook(self._critic_call)]
        if critic_target is not None:
            self.handles.append(critic_target.register_forward_pre_hook(self._target_call))

    def env_step(self, obs: np.ndarray, next_obs: np.ndarray, terminated: bool = False,
                 truncated: bool = False) -> None:
        """One env step of one env: its observation, the one that followed, and whether
        it ended the episode (the task's end, or a time limit only)."""
        self.steps += 1
        key = _key(obs)
        before = self.seen.pop(key, None)
        ended = TERMINATED if terminated else TRUNCATED if truncated else CONTINUED
        if before is not None:
            ended |= before[2]
        self.seen[key] = (self.steps, _key(next_obs), ended)
        if len(self.seen) > KEPT:
            self.seen.popitem(last=False)

    def collect(self) -> None:
        """After the loop's update: the statistics of what the hooks captured in it."""
        if self.obs is not None:
            self.newest = self._statistics(self.obs, self.next_obs)
            self.measured += 1
        self.obs = self.next_obs = None
        self.armed = False

    def done_rows(self, batch: Any) -> None:
        """The loop's batch of one update, `{"obs": [B, >= obs_dim], "dones": [B]}`
        (tensors or arrays; a ConfigError line if it is not that): its rows stored as
        done are counted by how the env ended their step: terminated (ever), truncated (a
        time limit only) or continued (rows whose observation the env never gave: not
        counted)."""
        obs, flags = self._checked(batch)
        rows = np.flatnonzero(flags > 0.5)
        if not len(rows):
            return
        if isinstance(obs, torch.Tensor):  # only the done rows leave the device
            picked = obs.detach()[torch.as_tensor(rows, device=obs.device)].float().cpu()
            observations = picked.numpy()
        else:
            observations = np.asarray(obs, dtype=np.float32)[rows]
        for row in observations.reshape(len(rows), -1)[:, :self.obs_dim]:
            found = self.seen.get(_key(row))
            if found is None:
                continue
            ended = found[2]
            name = ("terminated" if ended & TERMINATED else "truncated" if ended & TRUNCATED
                    else "continued")
            self.ended_rows[name] += 1

    def _checked(self, batch: Any) -> tuple[Any, np.ndarray]:
        """`done_rows`' batch: its observations and its done flags as an array."""
        if not isinstance(batch, Mapping) or "obs" not in batch or "dones" not in batch:
            keys = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
            raise ConfigError('after_update\'s batch is a dict with "obs" and "dones" (the '
                              f"batch's observations and done flags), not {keys}: "
                              'CleanRL\'s samples go in as {"obs": data.observations, '
                              '"dones": data.dones}')
        dones, obs = batch["dones"], batch["obs"]
        flags = np.asarray(dones.detach().float().cpu() if isinstance(dones, torch.Tensor)
                           else dones, dtype=np.float64).reshape(-1)
        shape = tuple(obs.shape) if hasattr(obs, "shape") else np.shape(obs)
        width = int(np.prod(shape[1:])) if len(shape) >= 2 else 0
        if len(shape) < 2 or shape[0] != len(flags) or width < self.obs_dim:
            raise ConfigError(f"after_update's batch: obs of shape {shape} and {len(flags)} "
                              f"done flags: obs must be [{len(flags)}, {self.obs_dim} or "
                              "more], one row per flag")
        return obs, flags

    def arm(self, updates: int) -> None:
        """Capture the loop's next update's batch, every EVERY updates."""
        self.armed = updates % EVERY == 0

    def _observations(self, args: tuple) -> torch.Tensor | None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or tensors[0].dim() != 2 or len(tensors[0]) == self.num_envs:
            return None
        first = tensors[0]
        return first[:, :self.obs_dim] if first.shape[1] >= self.obs_dim else None

    def _critic_call(self, module: nn.Module, args: tuple) -> None:
        if self.armed and not self.suspended and self.obs is None:
            self.obs = _detached(self._observations(args))

    def _target_call(self, module: nn.Module, args: tuple) -> None:
        if self.armed and not self.suspended and self.next_obs is None:
            self.next_obs = _detached(self._observations(args))

    def _statistics(self, obs: torch.Tensor, next_obs: torch.Tensor | None) -> dict[str, Any]:
        rows = obs.cpu().numpy()
        found = [self.seen.get(_key(row)) for row in rows]
        known = [i for i, f in enumerate(found) if f is not None]
        stats: dict[str, Any] = {"rows": len(rows), "known": len(known)}
        if not known:
            return stats
        stats["unknown"] = 1.0 - len(known) / len(rows)
        ages = np.array([self.steps - found[i][0] for i in known], dtype=np.float64)
        held = min(self.steps, self.capacity)
        stats["age_ratio"] = float(ages.mean() / (held / 2.0)) if held > 1 else None
        if next_obs is not None and len(next_obs) == len(rows):
            following = next_obs.cpu().numpy()
            wrong = sum(_key(following[i]) != found[i][1] for i in known)
            stats["mismatch"] = wrong / len(known)
        return stats

    def state(self) -> tuple[dict[str, Any] | None, int]:
        """The newest capture's statistics (None: none yet) and the captures so far."""
        return self.newest, self.measured

    def suspend(self) -> _Suspended:
        """A context in which the critic's calls are the Watcher's own, not captured."""
        return _Suspended(self)

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


class _Suspended:
    def __init__(self, owner: SampledBatches) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        self.owner.suspended += 1

    def __exit__(self, *exc: Any) -> None:
        self.owner.suspended -= 1


def _detached(x: torch.Tensor | None) -> torch.Tensor | None:
    return None if x is None else x.detach().clone()
