"""The training envs: act in all of them at once, hand their transitions out one at a time.

With `num_envs` envs (Gymnasium's vector API, `vector_mode` sync or async), one vector
step yields `num_envs` transitions; the Trainer takes them one by one, so everything it
does per env step (replay, updates, health rules, evaluation and checkpoint schedules)
is the same as with one env, and `utd_ratio` stays updates per env step. The actions
of one vector step come from the policy as it was before those transitions' updates.

Every episode's reset is seeded from (seed, episode index), so a checkpoint holds each
env's episode in progress as its index and the actions taken so far, plus the
transitions of the last vector step not handed out yet (and the actions of a vector
step the envs raised in, to take it again); `restore` replays each env's
actions to rebuild its state (in its own process when async). An env whose replay does
not reproduce the saved observation (not deterministic under replay) restarts its
episode, with a warning.
A re-seeded fork (`reseed`) seeds the episodes it starts from its own seed instead; the
checkpoint keeps that seed and the first episode it applies to.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.seeding import TRAIN_EPISODES, derive_seed
from rltrain.utils.training.envs import env_code
from rltrain.utils.training.exploration import Exploration
from rltrain.utils.training.normalize import Normalizer
from rltrain.utils.training.reward_terms import add_terms, step_terms, term_keys
from rltrain.utils.training.vector_envs import make_training_envs


@dataclass
class Episode:
    """An env's episode in progress; its actions let a resumed run rebuild the env state.
    `obs` is the env's latest observation (the next action is chosen from it)."""

    index: int
    obs: np.ndarray
    episode_return: float = 0.0  # of the finite rewards
    length: int = 0
    non_finite_rewards: int = 0  # NaN/inf rewards, left out of the return
    actions: list[np.ndarray] = field(default_factory=list)
    # The sums of the reward's terms the env reports in info (utils/training/reward_terms.py),
    # up to the latest vector step: a step's terms are added when the envs take it, before
    # its transition is handed out.
    reward_terms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Transition:
    env: int
    obs: np.ndarray
    action: np.ndarray
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool
    stored_reward: float  # what learning gets: `reward`, scaled with normalize.rewards
    # The exploration noise of the action (standard normal, independent of the env) and
    # what the state decided of it (Exploration.drawn); None: a random or replayed action.
    noise: np.ndarray | None = None
    steered: np.ndarray | None = None


class Collector:
    """The training envs, their episodes in progress and the transitions not handed out."""

    def __init__(self, config: TrainConfig, exploration: Exploration) -> None:
        self.config, self.exploration = config, exploration
        self.num_envs = config.num_envs
        self.envs = make_training_envs(config.env_name, config.num_envs, config.vector_mode,
                                       config.env_kwargs)
        # Transitions hand out observations as the agent sees them (utils/training/normalize.py);
        # the episodes keep the env's own, which a resume's replay reproduces.
        self.normalizer = Normalizer(config.normalize, config.gamma, config.num_envs)
        self.episodes: list[Episode] = []
        self.pending: deque[Transition] = deque()
        # The actions of a vector step the envs failed in (they raised): a checkpoint
        # keeps them, and the resumed run takes that step with the same actions.
        self.unstepped: np.ndarray | None = None
        # A re-seeded fork: (seed, first episode index) whose episodes reset from this seed.
        self.reseeded: tuple[int, int] | None = None
        # The info keys holding reward terms, read on the run's first env step (None: not
        # yet); () for an env that reports none, which then costs nothing per step.
        self.term_keys: tuple[str, ...] | None = None
        # What the run learns of its envs' faults (scripts/workers/distributed.py has some).
        self.report: Callable[[str], None] = lambda message: None
        self.updates: Callable[[], int] = lambda: 0  # the learner's updates (unused here)

    def status(self) -> dict[str, Any]:
        """Nothing to add to status.json (env runners add theirs)."""
        return {}

    def hooks(self, logger: Any, judge: Any = None) -> list[Any]:
        """Nothing more to watch (env runners' throughput goes to TensorBoard, and their
        pace to `judge`)."""
        return []

    def close(self) -> None:
        self.envs.close()

    def _seed(self, index: int) -> int:
        seed = self.config.seed
        if self.reseeded is not None and index >= self.reseeded[1]:
            seed = self.reseeded[0]
        return derive_seed(seed, TRAIN_EPISODES, index)

    def reseed(self, seed: int) -> None:
        """Episodes not started yet reset from `seed` (a re-seeded fork); the ones in
        progress go on as they are, like the weights."""
        started = [e.index for e in self.episodes]
        self.reseeded = (seed, max(started) + 1 if started else 0)

    def start(self, first_index: int) -> None:
        """Start an episode in every env: indices first_index, first_index + 1, ..."""
        indices = list(range(first_index, first_index + self.num_envs))
        with env_code(self.config.env_name, "reset"):
            obs, _ = self.envs.reset(seed=[self._seed(i) for i in indices])
        self.episodes = [Episode(index=i, obs=o) for i, o in zip(indices, obs, strict=True)]
        for env in range(self.num_envs):
            self.exploration.reset(env)

    def restart(self, env: int, index: int) -> None:
        """Start episode `index` in env `env` (its previous episode has ended)."""
        self.end(env, index)
        self.start_next(env)

    def end(self, env: int, index: int) -> None:
        """Env `env`'s episode has ended; episode `index` comes next, not started yet (no
        actions, its observation NaN) until `start_next` resets the env. A checkpoint
        written in between, or after a reset that raised, resumes by making that reset
        (`restore`)."""
        previous = self.episodes[env].obs
        self.episodes[env] = Episode(index=index, obs=np.full_like(previous, np.nan,
                                                                    dtype=np.float64))
        self.exploration.reset(env)

    def start_next(self, env: int) -> None:
        """Reset env `env` for the episode `end` recorded."""
        index = self.episodes[env].index
        mask = np.arange(self.num_envs) == env
        seeds = [self._seed(index) if m else None for m in mask]
        with env_code(self.config.env_name, "reset"):
            obs, _ = self.envs.reset(seed=seeds, options={"reset_mask": mask})
        self.episodes[env] = Episode(index=index, obs=obs[env])

    def next(self, env_steps: int, policy: Callable[[np.ndarray], np.ndarray]) -> Transition:
        """The next transition; steps all envs when the last vector step is used up.
        Random actions before `learning_starts` env steps, then the policy's plus noise."""
        if not self.pending:
            self._step_all(env_steps, policy)
        return self.pending.popleft()

    def _step_all(self, env_steps: int, policy: Callable[[np.ndarray], np.ndarray]) -> None:
        seen = self.normalizer.observation(np.stack([e.obs for e in self.episodes]))
        actions, drawn = self.unstepped, None
        if actions is None:
            if env_steps < self.config.learning_starts:
                actions = self.exploration.random_actions()
            else:
                self.exploration.drawn = None
                actions = self.exploration.noisy(policy(seen), env_steps)
                drawn = self.exploration.drawn
        self.unstepped = actions  # until the envs have taken the step
        with env_code(self.config.env_name, "step"):  # a copy: an env may write into it
            next_obs, rewards, terminated, truncated, infos = self.envs.step(actions.copy())
        self.unstepped = None
        if self.term_keys is None:
            self.term_keys = term_keys(infos)
        if self.term_keys:
            for episode, terms in zip(self.episodes, step_terms(infos, self.term_keys,
                                                                 self.num_envs), strict=True):
                add_terms(episode.reward_terms, terms)
        self.normalizer.update_observations(next_obs)
        seen_next = self.normalizer.observation(next_obs)
        stored = self.normalizer.rewards(rewards, np.logical_or(terminated, truncated))
        for env, episode in enumerate(self.episodes):
            episode.actions.append(actions[env])
            self.pending.append(Transition(env, seen[env], actions[env], float(rewards[env]),
                                           seen_next[env], bool(terminated[env]),
                                           bool(truncated[env]), float(stored[env]),
                                           *((None, None) if drawn is None
                                             else (drawn[0][env], drawn[1][env]))))
            episode.obs = next_obs[env]

    # ----------------------------------------------------------------- state
    def state_dict(self, action_dim: int) -> dict[str, Any]:
        return {
            **shared_state(self.episodes, self.pending, action_dim),
            "unstepped": None if self.unstepped is None else torch.from_numpy(
                np.array(self.unstepped, dtype=np.float32)),
            "reseeded": None if self.reseeded is None else list(self.reseeded),
            "term_keys": None if self.term_keys is None else list(self.term_keys),
        }

    def restore(self, state: dict[str, Any]) -> list[str]:
        """Rebuild every env's episode from a checkpoint; returns warnings."""
        saved = state["episodes"]
        if "workers" in state:  # written with env runners, whose episodes it cannot replay
            self.episodes, self.pending = [], deque()
            return ["the checkpoint was written by env runners (num_workers) and this run "
                    "has none: the episodes in progress start anew and the transitions not "
                    "handed out are dropped, so this resume is not bit-exact"]
        self.pending = pending_from_state(state)
        unstepped = state.get("unstepped")  # absent from checkpoints written before it
        self.unstepped = None if unstepped is None else unstepped.numpy()
        reseeded = state.get("reseeded")  # absent: never re-seeded
        self.reseeded = None if reseeded is None else (int(reseeded[0]), int(reseeded[1]))
        keys = state.get("term_keys")  # absent: written before reward terms, read anew
        self.term_keys = None if keys is None else tuple(str(k) for k in keys)
        if not saved:  # stopped before the envs' first reset: the run starts them
            self.episodes = []
            return []
        # Each env resets itself with its episode's seed and replays its actions. The
        # vector reset before it is for the vector env's own bookkeeping, which `call`
        # bypasses: a sync vector env keeps each env's latest observation and cannot reset
        # one env (restart, when a pending transition ends an episode) before it has them.
        seeds = [self._seed(int(e["index"])) for e in saved]
        with env_code(self.config.env_name, "the replay of the episodes in progress"):
            self.envs.reset(seed=seeds)
            replayed = self.envs.call("replay", [(seed, e["actions"].numpy())
                                                 for seed, e in zip(seeds, saved, strict=True)])
        self.episodes, warnings = [], []
        for env, (e, obs) in enumerate(zip(saved, replayed, strict=True)):
            index, actions = int(e["index"]), e["actions"].numpy()
            self.episodes.append(Episode(index=index, obs=obs,
                                         episode_return=float(e["episode_return"]),
                                         length=int(e["length"]), actions=list(actions),
                                         non_finite_rewards=int(e.get("non_finite_rewards", 0)),
                                         reward_terms=terms_from_state(e)))
            if not_started(e):  # its reset raised: the replay's reset starts it
                continue
            if not np.array_equal(np.asarray(obs), e["obs"].numpy()):
                self.pending = deque(t for t in self.pending if t.env != env)
                self.restart(env, index)
                warnings.append(
                    f"env '{self.config.env_name}' did not reproduce episode {index} when its "
                    f"{len(actions)} actions were replayed (not deterministic under replay); "
                    "that episode restarts, so this resume is not bit-exact")
        return warnings


def shared_state(episodes: list[Episode], pending: deque[Transition],
                 action_dim: int) -> dict[str, Any]:
    """The episodes in progress and the transitions not handed out, as a checkpoint holds
    them (scripts/workers/distributed.py writes its own in the same layout)."""
    def actions(episode: Episode) -> torch.Tensor:
        return torch.from_numpy(np.stack(episode.actions) if episode.actions
                                else np.zeros((0, action_dim), dtype=np.float32))

    return {
        "episodes": [{"index": e.index, "obs": torch.as_tensor(np.array(e.obs)),
                      "episode_return": e.episode_return, "length": e.length,
                      "non_finite_rewards": e.non_finite_rewards,
                      "reward_terms": dict(e.reward_terms),
                      "actions": actions(e)} for e in episodes],
        "pending": [{"env": t.env, "obs": torch.as_tensor(np.array(t.obs)),
                     "action": torch.as_tensor(np.array(t.action)), "reward": t.reward,
                     "next_obs": torch.as_tensor(np.array(t.next_obs)),
                     "terminated": t.terminated, "truncated": t.truncated,
                     "stored_reward": t.stored_reward,
                     **({} if t.noise is None else {
                         "noise": torch.as_tensor(np.array(t.noise)),
                         "steered": torch.as_tensor(np.array(t.steered))})}
                    for t in pending],
    }


def not_started(episode: dict[str, Any]) -> bool:
    """True for a checkpoint's episode whose reset raised (Collector.restart)."""
    obs = episode["obs"]
    return len(episode["actions"]) == 0 and bool(torch.isnan(obs.double()).all())


def terms_from_state(episode: dict[str, Any]) -> dict[str, float]:
    """An episode's reward-term sums as a checkpoint holds them (absent: none kept)."""
    return {str(k): float(v) for k, v in episode.get("reward_terms", {}).items()}


def pending_from_state(state: dict[str, Any]) -> deque[Transition]:
    return deque(Transition(
        int(t["env"]), t["obs"].numpy(), t["action"].numpy(), float(t["reward"]),
        t["next_obs"].numpy(), bool(t["terminated"]), bool(t["truncated"]),
        float(t.get("stored_reward", t["reward"])),  # absent: written before normalize
        *((t["noise"].numpy(), t["steered"].numpy()) if "noise" in t else (None, None)))
        for t in state["pending"])
