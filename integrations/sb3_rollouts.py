"""SB3's vector steps as rltrain's transitions (`transitions`), and a collection's
vector steps, kept as SB3 makes them and told to the run together (RltrainCallback, for
PPO, A2C and DQN).

SB3 collects a rollout (PPO, A2C) or `train_freq` steps (DQN), then trains on them: no
weight changes while it collects. So the steps of one collection can be judged in one
call at its last step, before SB3 learns from them, and the state-action map's actions
computed in one pass of the policy, which gives at the last step the action it gave at
each: the per-step work of watching (a hook's calls, a pass per step) becomes a few
array operations per collection. A block is judged earlier where waiting could lose
something: a step with a NaN/inf value (its rule pauses the run at that step, before
the library stores it), or a block grown to its bound (`MAX_STEPS`, `MAX_BYTES`,
`MAX_SECONDS`: a slow env's run still writes its status, and DQN, which may stop at
any step, still sees `rltrain pause`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from stable_baselines3.common.type_aliases import TrainFrequencyUnit

from rltrain.utils.diagnosis.rules.health.non_finite import all_finite, finite_rows, is_finite

MAX_STEPS = 512  # vector steps a block holds at most
MAX_BYTES = 16 << 20  # the observations a block holds at most (images: a few steps)
MAX_SECONDS = 1.0  # how long a block waits at most (a slow env: status, `rltrain pause`)


class StepBlock:
    """The vector steps since the last `take`: each step's arrays as SB3 gave them (the
    observations copied: a VecEnv may reuse its arrays), and the observations the
    first was taken at."""

    def __init__(self) -> None:
        self.first_obs: np.ndarray | None = None
        self.started = 0.0  # when its first step was kept (time.monotonic)
        self.steps: list[tuple[Any, ...]] = []
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.steps)

    def add(self, obs: Any, new_obs: Any, actions: np.ndarray, rewards: Any, learnt: Any,
            dones: Any, infos: list[dict[str, Any]]) -> bool:
        """One vector step (`obs`: the observations it acted on, read only for a
        block's first step; `rewards`: the env's, `learnt`: what the model learns from).
        Whether all of its values are finite."""
        if self.first_obs is None:
            self.first_obs = np.array(obs)
            self.started = time.monotonic()
        new_obs = np.array(new_obs)
        rewards = np.array(rewards, dtype=np.float64)
        self.steps.append((new_obs, actions, rewards, np.array(learnt, dtype=np.float32),
                           np.asarray(dones, dtype=bool), infos))
        self.bytes += new_obs.nbytes
        return all_finite(rewards, new_obs, actions) and finals_finite(dones, infos)

    def full(self) -> bool:
        return (len(self.steps) >= MAX_STEPS or self.bytes >= MAX_BYTES
                or time.monotonic() - self.started >= MAX_SECONDS)

    def take(self) -> Rows | None:
        """The block's steps as rows ([k * num_envs] each, in step order), and an empty
        block (None: it was empty)."""
        if not self.steps:
            return None
        new_obs, actions, rewards, learnt, dones, infos = zip(*self.steps, strict=True)
        n = len(dones[0])
        next_rows = np.concatenate(new_obs)
        obs = np.concatenate([self.first_obs, next_rows[:-n]])
        rows = Rows(obs, next_rows, np.concatenate(actions), np.concatenate(rewards),
                    np.concatenate(learnt), np.concatenate(dones),
                    [info for step in infos for info in step])
        self.first_obs, self.steps, self.bytes = None, [], 0
        return rows


class Rows:
    """A block's steps as rows: row r is env r % num_envs's, in step order; `next_obs`
    is what the envs returned (an ended episode's reset observation: its final one is in
    `infos`)."""

    def __init__(self, obs: np.ndarray, next_obs: np.ndarray, actions: np.ndarray,
                 rewards: np.ndarray, learnt: np.ndarray, dones: np.ndarray,
                 infos: list[dict[str, Any]]) -> None:
        self.obs, self.next_obs, self.actions = obs, next_obs, actions
        self.rewards, self.learnt, self.dones, self.infos = rewards, learnt, dones, infos


def finals_finite(dones: Any, infos: list[dict[str, Any]]) -> bool:
    """Whether the final observations of the episodes that ended (in their infos: SB3
    has reset those envs) are finite: SB3 stores them as the transitions' next ones."""
    if not any(np.asarray(dones).tolist()):
        return True
    finals = [info.get("terminal_observation") for info in infos]
    return all(final is None or bool(np.isfinite(final).all())
               for final, done in zip(finals, np.asarray(dones).tolist(), strict=True)
               if done)


def collection_ends(loc: dict[str, Any], on_policy: bool) -> bool:
    """Whether the step SB3's collect_rollouts calls the callback at (`loc`: its locals)
    is its collection's last: SB3 trains next."""
    if on_policy:
        return loc["n_steps"] >= loc["n_rollout_steps"] - 1  # counted after the call
    freq = loc["train_freq"]
    if freq.unit == TrainFrequencyUnit.STEP:
        return loc["num_collected_steps"] >= freq.frequency
    return loc["num_collected_episodes"] + int(np.sum(loc["dones"])) >= freq.frequency


def transitions(new_obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                dones: np.ndarray, infos: list[dict[str, Any]]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A vector step of SB3's as rltrain's transitions: each env's next observation (the
    true final one, from its info, where its episode ended: SB3 has reset that env
    already), terminated and truncated (SB3's TimeLimit.truncated), and whether each is
    finite (what rltrain's replay buffer would store)."""
    finite = finite_rows(new_obs, actions, rewards)  # one call for the vector step
    dones = np.asarray(dones, dtype=bool)
    if not any(dones.tolist()):  # most steps: no episode ended
        return new_obs, dones, dones, finite
    truncated = np.zeros(len(dones), dtype=bool)
    next_obs = new_obs
    for env in np.flatnonzero(dones):
        info = infos[env]
        truncated[env] = bool(info.get("TimeLimit.truncated", False))
        final = info.get("terminal_observation")
        if final is not None:
            if next_obs is new_obs:
                next_obs = np.array(new_obs)  # SB3's own array stays as it is
            next_obs[env] = final
            finite[env] = is_finite(final, actions[env], float(rewards[env]))
    return next_obs, dones & ~truncated, truncated, finite
