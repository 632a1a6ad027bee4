"""State-action map : which action does the policy pick where?

A forward hook on the actor samples (state, action) pairs while the agent acts, at a
rate that decays from 1 to `sample_rate_final`; the hook only copies two small vectors,
the clustering happens later. At each heatmap, the states
are clustered by k-means (SciPy's `kmeans2` the first time, then each centre follows
the running mean of the states it is given, so cluster ids and regions persist between
heatmaps) and each action dimension is cut into fixed bins over the action range (so a
column means the same action in every heatmap). A Discrete(n) action (its index) has n
bins, one per action: a cluster's row counts the actions the policy chose there.
Each cluster gets P(bin | cluster) and a verdict: fixated (one bin >= 0.95), chaotic
(normalised entropy >= 0.9) or blind (no bin reaches a clear preference).

A verdict alone is an observation: a learned deterministic policy is *meant* to be
fixated almost everywhere. It becomes a warning only with a bad outcome: the
discounted return-to-go of the sampled states in that cluster dropping by more than
`trace_drop` of its magnitude since the previous heatmap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rltrain.utils.diagnosis.measure.kmeans import kmeans, label_sums, nearest
from rltrain.utils.diagnosis.rules import state_action_rules

MIN_CLUSTER_SAMPLES = 20
MIN_SAMPLES = 200
KMEANS_ITERATIONS = 20


@dataclass
class ClusterView:
    """One heatmap: P(bin | cluster) per action dimension, verdicts and outcomes."""

    env_steps: int
    probs: np.ndarray  # [clusters, action_dim, bins]
    counts: np.ndarray  # [clusters]
    verdicts: dict[str, list[tuple[int, int]]]  # rule -> [(cluster, action dim)]
    outcome: np.ndarray  # [clusters] mean return-to-go (nan: too few samples)
    dropped: list[int]  # clusters whose outcome dropped since the previous heatmap
    typical: dict[int, list[list[float]]]  # flagged cluster -> states near its centre
    centroids: np.ndarray | None = None  # [clusters, obs_dim] mean state, in the env's units

    def summary(self) -> dict[str, Any]:
        """The heatmap's clusters as JSON (`heatmaps/clusters_step_<N>.json`)."""
        return {"env_steps": self.env_steps,
                "clusters": {str(c): {
                    "samples": int(self.counts[c]),
                    "return_to_go": None if np.isnan(self.outcome[c]) else
                    round(float(self.outcome[c]), 4),
                    "verdicts": [rule for rule, found in self.verdicts.items()
                                 if any(cl == c for cl, _ in found)],
                    "action_probs": self.probs[c].round(3).tolist(),
                    "typical_states": self.typical.get(c)}
                    for c in range(len(self.counts))}}


class StateActionMap:
    """Samples (state, action) from the actor and turns them into cluster verdicts."""

    def __init__(self, obs_dim: int, action_low: np.ndarray, action_high: np.ndarray,
                 settings: Any, gamma: float, seed: int, num_envs: int = 1,
                 bins: int | None = None) -> None:
        """`bins`: per action dimension (None: `settings.action_bins`); a Discrete(n)
        action space's n, one bin per action, over its [start - 0.5, start + n - 0.5]."""
        self.settings, self.gamma = settings, gamma
        self.bins = bins or settings.action_bins
        self.low, self.high = action_low.astype(np.float64), action_high.astype(np.float64)
        n = settings.max_samples
        self.states = np.zeros((n, obs_dim), dtype=np.float32)
        self.actions = np.zeros((n, len(action_low)), dtype=np.float32)
        self.return_to_go = np.full(n, np.nan, dtype=np.float64)
        self.size, self.ptr = 0, 0
        self.recent = 0  # samples since the last heatmap
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.collecting = True
        self.env_steps = 0
        # Per training env: (ring row, step in episode) of the episode in progress.
        self._episode_rows: list[list[tuple[int, int]]] = [[] for _ in range(num_envs)]
        self._episode_step = [0] * num_envs
        self._centers: np.ndarray | None = None  # k-means centres of the latest heatmap
        self._seen = np.zeros(0)  # states each centre was given so far (its running mean)
        self._seed = seed
        self._previous_outcome: np.ndarray | None = None

    # ------------------------------------------------------------ sampling
    def sample_rate(self, env_steps: Any = None) -> Any:
        """The share of acting calls' rows kept after `env_steps` env steps (the map's
        own count by default; an array gives each's)."""
        s = self.settings
        steps = self.env_steps if env_steps is None else env_steps
        rate = 1.0 + np.minimum(steps / s.sample_decay_steps, 1.0) * (s.sample_rate_final - 1.0)
        return float(rate) if env_steps is None else rate

    def hook(self, _module: torch.nn.Module, inputs: tuple,
             output: torch.Tensor | tuple[torch.Tensor, ...]) -> None:
        """Forward hook on the actor: keep some of its acting calls (`act`, in inference
        mode, on one row per training env; the Q check's calls under `no_grad` and the
        evaluations, paused around, are left out). Row i is training env i's observation.
        A sampling policy's exploring call gives a tuple whose first item is its
        deterministic action (networks/gaussian_actor.py `Acting`): that is what is kept."""
        obs = inputs[0]
        if (not self.collecting or obs.shape[0] != len(self._episode_step)
                or not torch.is_inference_mode_enabled()):
            return
        action = output[0] if isinstance(output, tuple) else output
        kept = self.chosen(obs.shape[0])
        if kept:  # on CUDA, one transfer each for all the envs' rows
            self.keep_rows(kept, obs.detach().cpu().numpy(), action.detach().cpu().numpy())

    def chosen(self, num_envs: int) -> list[int]:
        """The training envs whose row of one acting call is kept, at the current rate."""
        draws = self.rng.random(num_envs).tolist()  # the draws of one per env in turn
        rate = self.sample_rate()
        return [env for env, draw in enumerate(draws) if draw < rate]

    def chosen_block(self, vector_steps: int, envs: int, env_steps: int,
                     learning_starts: int) -> np.ndarray:
        """`chosen` of each of several acting calls on `envs` envs, the first after env
        step `env_steps`, drawn as those calls would draw them (none in the warm-up, at
        the rate of each call's step): the kept rows of their [vector_steps * envs]
        rows."""
        before = env_steps + envs * np.arange(vector_steps)  # env steps before each call
        acting = before >= learning_starts  # the warm-up's actions are random
        if not acting.any():
            return np.zeros(0, dtype=np.int64)
        rates = self.sample_rate(before)
        draws = np.ones((vector_steps, envs))
        draws[acting] = self.rng.random(int(acting.sum()) * envs).reshape(-1, envs)
        return np.flatnonzero(draws < rates[:, None])

    def keep_block(self, rows: np.ndarray, envs: int, states: np.ndarray,
                   actions: np.ndarray) -> None:
        """Keep `chosen_block`'s rows (`states`, `actions`: theirs, in that order) of
        vector steps not yet told (`on_rows`): row r is env r % envs's, r // envs steps
        into the block."""
        for row, state, action in zip(rows.tolist(), states, actions, strict=True):
            self._keep(row % envs, state, action, row // envs)

    def keep_rows(self, kept: list[int], states: np.ndarray, actions: np.ndarray) -> None:
        """Keep rows `kept` of one acting call's states and actions ([num_envs, dim])."""
        for env in kept:
            self._keep(env, states[env], actions[env])

    def keep_row(self, env: int, state: np.ndarray, action: np.ndarray) -> None:
        """Keep training env `env`'s state and action of a step its envs did not take
        together with the others (a library's env runners step on their own)."""
        self._keep(env, state, action)

    def _keep(self, env: int, obs: np.ndarray, action: np.ndarray, ahead: int = 0) -> None:
        """`ahead`: steps of env `env` after those told so far."""
        row = self.ptr
        self.states[row] = obs
        self.actions[row] = action
        self.return_to_go[row] = np.nan
        self._episode_rows[env].append((row, self._episode_step[env] + ahead))
        self.ptr = (self.ptr + 1) % len(self.states)
        self.size = min(self.size + 1, len(self.states))
        self.recent = min(self.recent + 1, len(self.states))

    def on_step(self, env_steps: int, env: int = 0) -> None:
        self.env_steps = env_steps
        self._episode_step[env] += 1

    def on_rows(self, env_steps: int, envs: int, vector_steps: int) -> None:
        """`on_step` of each row of several vector steps, all kept."""
        self.env_steps = env_steps
        for env in range(envs):
            self._episode_step[env] += vector_steps

    def end_episode(self, rewards: np.ndarray, env: int = 0) -> None:
        """Give the sampled states of training env `env`'s episode their discounted
        return-to-go."""
        if len(rewards) and self._episode_rows[env]:
            discounts = self.gamma ** np.arange(len(rewards))
            tail = np.cumsum((rewards * discounts)[::-1])[::-1] / discounts
            for row, step in self._episode_rows[env]:
                if step < len(tail):
                    self.return_to_go[row] = tail[step]
        self._episode_rows[env] = []
        self._episode_step[env] = 0

    # -------------------------------------------------------------- verdicts
    def ready(self) -> bool:
        return int(np.isfinite(self.return_to_go[:self.size]).sum()) >= MIN_SAMPLES

    def analyse(self, env_steps: int) -> ClusterView:
        valid = np.isfinite(self.return_to_go[:self.size])
        states = self.states[:self.size][valid]
        actions = self.actions[:self.size][valid]
        rtg = self.return_to_go[:self.size][valid]
        labels = self._cluster(states)
        return self._view(env_steps, states, actions, rtg, labels, len(self._centers))

    def _cluster(self, states: np.ndarray) -> np.ndarray:
        """Each state's cluster. The first heatmap fits k-means (k-means++ start, Lloyd
        iterations); later ones assign the states to the nearest centre and move each
        centre to the running mean of every state it was given so far (as mini-batch
        k-means does), so a cluster stays the same region of state space from heatmap
        to heatmap and its return-to-go can be compared."""
        data = states.astype(np.float64)
        k = min(self.settings.n_clusters, len(data))
        if self._centers is None or len(self._centers) != k:
            self._centers = kmeans(data, k, KMEANS_ITERATIONS, self._seed)
            self._seen = np.zeros(k)
        counts, sums = label_sums(data, nearest(data, self._centers), k)
        given = counts > 0
        self._seen += counts
        self._centers[given] += (sums[given] - counts[given, None] * self._centers[given]) \
            / self._seen[given, None]
        return nearest(data, self._centers)

    def _view(self, env_steps: int, states: np.ndarray, actions: np.ndarray,
              rtg: np.ndarray, labels: np.ndarray, k: int) -> ClusterView:
        bins = self.bins
        scaled = (actions - self.low) / (self.high - self.low)
        binned = np.clip((scaled * bins).astype(int), 0, bins - 1)  # [N, action_dim]
        counts = np.bincount(labels, minlength=k)
        probs = np.zeros((k, actions.shape[1], bins))
        for d in range(actions.shape[1]):
            np.add.at(probs[:, d], (labels, binned[:, d]), 1.0)
        probs /= np.maximum(counts, 1)[:, None, None]
        outcome = np.array([rtg[labels == c].mean() if counts[c] >= MIN_CLUSTER_SAMPLES
                            else np.nan for c in range(k)])
        verdicts = self._verdicts(probs, counts)
        dropped = self._dropped(outcome)
        flagged = {c for found in verdicts.values() for c, _ in found}
        typical = self._typical(states, labels, flagged)
        centroids = np.stack([states[labels == c].mean(axis=0) if counts[c]
                              else np.full(states.shape[1], np.nan) for c in range(k)])
        return ClusterView(env_steps, probs, counts, verdicts, outcome, dropped, typical,
                           centroids)

    def _verdicts(self, probs: np.ndarray, counts: np.ndarray) -> dict[str, list]:
        top = probs.max(axis=2)  # [clusters, action_dim]
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.nansum(np.where(probs > 0, probs * np.log(probs), 0.0), axis=2)
        entropy /= np.log(probs.shape[2])
        enough = counts >= MIN_CLUSTER_SAMPLES
        verdicts: dict[str, list] = {"fixated_cluster": [], "chaotic_cluster": [],
                                     "blind_cluster": []}
        for c, d in zip(*np.nonzero(enough[:, None] & np.ones_like(top, bool)), strict=True):
            rule = state_action_rules.verdict(self.settings, top[c, d], entropy[c, d])
            if rule is not None:
                verdicts[rule].append((int(c), int(d)))
        return verdicts

    def _dropped(self, outcome: np.ndarray) -> list[int]:
        """Clusters whose return-to-go fell by more than trace_drop of its magnitude or of
        the spread of return-to-go across the clusters, whichever is larger: a
        return-to-go near 0 (LunarLander's, where crashes and landings cancel) would
        otherwise fall by 30% on noise alone."""
        previous, self._previous_outcome = self._previous_outcome, outcome
        if previous is None or len(previous) != len(outcome):
            return []
        known = previous[np.isfinite(previous)]
        spread = float(known.max() - known.min()) if known.size else 0.0
        drop = self.settings.trace_drop
        with np.errstate(invalid="ignore"):
            fell = outcome < previous - drop * np.maximum(np.abs(previous), spread)
        return [int(c) for c in np.nonzero(fell)[0]]

    def _typical(self, states: np.ndarray, labels: np.ndarray,
                 clusters: set[int]) -> dict[int, list[list[float]]]:
        """Ten states nearest to each flagged cluster's centre."""
        typical = {}
        for c in sorted(clusters):
            members = states[labels == c]
            centre = self._centers[c]
            nearest = np.argsort(((members - centre) ** 2).sum(axis=1))[:10]
            typical[c] = members[nearest].round(5).tolist()
        return typical

    def saturation(self) -> float | None:
        """Share of the policy's actions sampled since the last call that lie within 1% of
        the action bounds (in any dimension): the current policy, not its history."""
        if self.recent == 0:
            return None
        rows = (self.ptr - np.arange(1, self.recent + 1)) % len(self.actions)
        self.recent = 0
        a = self.actions[rows].astype(np.float64)
        margin = 0.01 * (self.high - self.low)
        near = (a <= self.low + margin) | (a >= self.high - margin)
        return float(near.any(axis=1).mean())

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        n = self.size
        return {"states": torch.from_numpy(self.states[:n].copy()),
                "actions": torch.from_numpy(self.actions[:n].copy()),
                "return_to_go": torch.from_numpy(self.return_to_go[:n].copy()),
                "ptr": self.ptr, "size": n, "recent": self.recent,
                "rng": self.rng.bit_generator.state,
                "episode_rows": [list(rows) for rows in self._episode_rows],
                "episode_step": list(self._episode_step),
                "env_steps": self.env_steps,
                "previous_outcome": None if self._previous_outcome is None
                else self._previous_outcome.tolist(),
                "centers": None if self._centers is None
                else torch.from_numpy(self._centers.copy()),
                "center_counts": torch.from_numpy(self._seen.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = int(state["size"])
        self.states[:n] = state["states"].numpy()
        self.actions[:n] = state["actions"].numpy()
        self.return_to_go[:n] = state["return_to_go"].numpy()
        self.ptr, self.size = int(state["ptr"]), n
        self.recent = int(state["recent"])
        self.rng.bit_generator.state = state["rng"]
        rows, steps = state["episode_rows"], state["episode_step"]
        if isinstance(steps, int):  # saved before num_envs: one env
            rows, steps = [rows], [steps]
        self._episode_rows = [[tuple(x) for x in env_rows] for env_rows in rows]
        self._episode_step = [int(x) for x in steps]
        self.env_steps = int(state["env_steps"])
        previous = state["previous_outcome"]
        self._previous_outcome = None if previous is None else np.asarray(previous)
        centers = state["centers"]
        self._centers = None if centers is None else centers.numpy().astype(np.float64)
        if centers is not None:
            counts = state.get("center_counts")  # absent in checkpoints of rltrain <= 0.1.0
            self._seen = (np.zeros(len(self._centers)) if counts is None
                          else counts.numpy().astype(np.float64))
