"""Rules on a Q network acted on epsilon-greedily (DQN, the Q_LEARNING family, watched
in Stable-Baselines3): `exploration_schedule` and `q_beyond_returns`.

- `exploration_schedule` (its own hook): epsilon (SB3's `exploration_rate`, in the
  update metrics) has reached its final value, `patience_steps` env steps have passed
  since then and since learning started, and the return has never moved from where it
  started: the mean of `episodes` episodes in a row has never stood more than
  `threshold` of the first `episodes` episodes' std above theirs. A greedy policy of an
  untrained Q network then only meets the states it already knows: exploration ended
  before it found anything to learn (Mnih et al., 2015 anneal epsilon over the first
  million frames; RL Zoo's CartPole DQN over 16% of the run). A warning where the
  schedule is unusual (exploration_fraction under 0.1, a final epsilon under 0.01); a
  note where it is usual: the return of a slow task may move later.
- `q_beyond_returns` (a check, handed utils/diagnosis/measure/q_values.py's
  measurements): the mean Q of the taken actions on the newest transitions lies
  outside the returns any policy could reach by more than `threshold` of their width,
  at each of the newest `measurements` measurements and further out at the newest.
  With rewards in [lo, hi] (the smallest and largest seen), a discounted return lies in
  [min(lo, lo / (1 - gamma)), max(hi, hi / (1 - gamma))] (an episode may end after one
  step). Q values past it feed on themselves through the bootstrapped target: a target
  network synced every update or two (SB3's `target_update_interval`, in env steps,
  against its train_freq and gradient_steps) is then the cause named; else the
  learning rate.

Both name SB3's settings (`config.library`) and propose changes in SB3's names.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from rltrain.agents.families import Q_LEARNING
from rltrain.utils.config.fields import AT_LEAST_ONE, Range
from rltrain.utils.diagnosis.rules.on_policy_rules import library_setting
from rltrain.utils.diagnosis.rules.spec import Option, RuleCheck, RuleHook, RuleSpec
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import EpisodeEnd, Update

USUAL_FRACTION = 0.1  # SB3's default exploration_fraction (RL Zoo: 0.1-0.5)
MIN_FINAL_EPS = 0.01  # a final epsilon under this explores no more
USUAL_FINAL_EPS = 0.05  # SB3's default
MIN_SYNC_UPDATES = 10  # a target synced within fewer updates chases the online network
SYNC_UPDATES = 100  # the updates per target sync proposed (RL Zoo's CartPole DQN: 128)
LR_FACTOR = 0.1  # the learning rate proposed for diverging Q values, relative to today's

SPECS = (
    RuleSpec(
        name="exploration_schedule", section="diagnostics", threshold=1.0,
        algorithms=(Q_LEARNING,),
        fires_when="epsilon has reached its final value `patience_steps` env steps ago (and "
                   "learning started as long ago), and no mean of `episodes` returns in a "
                   "row has stood more than this many of the first episodes' std above "
                   "their mean",
        hypothesis="if epsilon is annealed to its final value before the return has moved "
                   "(exploration_fraction too small, a final epsilon of about 0), then the "
                   "greedy policy of a Q network that has learnt nothing yet keeps meeting "
                   "the states it knows, and the return stays where it started",
        check="anneal epsilon over more of the run (exploration_fraction 0.1-0.5) and keep "
              "a final epsilon of a few percent (exploration_final_eps 0.05)",
        options=(Option("patience_steps", 10_000, "env steps after exploration ended (and "
                        "learning started) before the return is judged", AT_LEAST_ONE),
                 Option("episodes", 20, "episodes whose mean return is the return's level",
                        AT_LEAST_ONE))),
    RuleSpec(
        name="q_beyond_returns", section="diagnostics", threshold=0.1,
        algorithms=(Q_LEARNING,),
        fires_when="the mean Q of the taken actions lies outside the discounted returns any "
                   "policy could reach (from the rewards seen and gamma) by more than this "
                   "share of their width, at each of the newest measurements and further "
                   "out at the newest",
        hypothesis="if the Q network's bootstrapped targets feed on themselves (a target "
                   "network synced every update or two, too high a learning rate), then its "
                   "Q values climb past every return the agent can reach",
        check="sync the target network less often (target_update_interval: some hundred "
              "updates between syncs), or lower the learning_rate",
        options=(Option("every_updates", 250, "updates between two measurements",
                        AT_LEAST_ONE),
                 # Growth is judged from the first measurement kept to the last: two at least.
                 Option("measurements", 4, "newest measurements that must each lie outside",
                        Range(2)))),
)


class ExplorationSchedule(RuleHook):
    spec = SPECS[0]
    update_batches = True  # reads the exploration rate, which a batch's updates share

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.over_at: int | None = None  # the env step epsilon reached its final value at
        self.recent: deque[float] = deque(maxlen=self.settings.episodes)
        self.start: tuple[float, float] | None = None  # the first episodes' mean and std
        self.moved = 0.0  # the best level so far, in the first episodes' std above them
        self.fired = False

    def on_update(self, update: Update) -> list[Finding]:
        rate = update.metrics.get("exploration_rate")
        final = library_setting(self.context.config, "exploration_final_eps")
        if self.over_at is None and rate is not None and isinstance(final, (int, float)) \
                and rate <= final + 1e-9:
            self.over_at = update.env_steps
        return []

    def on_episode_end(self, episode: EpisodeEnd) -> list[Finding]:
        self.recent.append(episode.episode_return)
        if len(self.recent) < self.recent.maxlen:
            return []
        level = sum(self.recent) / len(self.recent)
        if self.start is None:
            spread = math.sqrt(sum((r - level) ** 2 for r in self.recent) / len(self.recent))
            self.start = (level, spread)
        mean, spread = self.start
        gain = (level - mean) / spread if spread > 0 else (math.inf if level > mean else 0.0)
        self.moved = max(self.moved, gain)
        return self._judge(episode.env_steps, level)

    def _judge(self, env_steps: int, level: float) -> list[Finding]:
        if self.over_at is None or self.fired or self.start is None:
            return []
        since = env_steps - max(self.over_at, self.context.config.learning_starts)
        if since < self.settings.patience_steps:
            return []
        self.record(env_steps, moved=round(self.moved, 3), since_steps=since)
        if self.moved > self.rule.threshold:
            return []
        self.fired = True  # once: the schedule does not come back
        return self._finding(env_steps, level)

    def _finding(self, env_steps: int, level: float) -> list[Finding]:
        config = self.context.config
        fraction = library_setting(config, "exploration_fraction")
        final = library_setting(config, "exploration_final_eps")
        proposed: dict[str, Any] = {}
        if isinstance(fraction, (int, float)) and fraction < USUAL_FRACTION:
            proposed["exploration_fraction"] = float(f"{min(10 * fraction, 0.5):.3g}") \
                if 10 * fraction >= USUAL_FRACTION else USUAL_FRACTION
        if isinstance(final, (int, float)) and final < MIN_FINAL_EPS:
            proposed["exploration_final_eps"] = USUAL_FINAL_EPS
        usual = not proposed
        if usual:  # the schedule is usual: explore for longer than it does
            proposed["exploration_fraction"] = float(f"{min(2 * float(fraction), 1.0):.3g}")
        change = ", ".join(f"{k} {v:g}" for k, v in proposed.items())
        mean, spread = self.start
        return self.fire(
            env_steps, round(self.moved, 3),
            f"epsilon reached its final {final} at env step {self.over_at} (exploration_fraction "
            f"{fraction}), and {env_steps - self.over_at} env steps later the mean return of "
            f"{len(self.recent)} episodes has never stood more than {self.moved:.2f} of the "
            f"first episodes' std ({spread:.3g}) above their {mean:.4g} (now {level:.4g}): "
            f"exploration ended before the return moved; {change}", suggested_set=proposed,
            # A usual schedule (RL Zoo anneals over 10-50% of a run, to a few percent)
            # explores what a slow task needs too: its return may move later (DQN
            # LunarLander 0.37 std above its start 10,000 steps after, ending at 137).
            observation=usual)

    def state_dict(self) -> dict[str, Any]:
        return {"over_at": self.over_at, "recent": list(self.recent),
                "start": None if self.start is None else list(self.start),
                "moved": self.moved, "fired": self.fired}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.over_at = state["over_at"]
        self.recent.extend(float(x) for x in state["recent"])
        self.start = None if state["start"] is None else (float(state["start"][0]),
                                                          float(state["start"][1]))
        self.moved, self.fired = float(state["moved"]), bool(state["fired"])


def updates_per_sync(library: dict[str, Any]) -> float | None:
    """SB3 DQN's gradient steps between two syncs of its target network: it syncs every
    target_update_interval env steps (counted per vector step: interval // n_envs) and
    trains `gradient_steps` every `train_freq` steps, so a sync at least as frequent as
    the training makes every train phase start from a fresh copy. None: not known (a
    train_freq in episodes, settings not recorded)."""
    interval, freq = library.get("target_update_interval"), library.get("train_freq")
    steps, n_envs = library.get("gradient_steps"), library.get("n_envs", 1)
    if not (isinstance(interval, int) and isinstance(freq, list) and isinstance(steps, int)):
        return None
    if freq[1] != "step":
        return None
    per_phase = steps if steps > 0 else freq[0] * n_envs  # -1: one per transition
    sync_every = max(interval // max(n_envs, 1), 1)  # vector steps
    if sync_every <= freq[0]:
        return float(per_phase)
    return per_phase * sync_every / freq[0]


class QBeyondReturns(RuleCheck):
    spec = SPECS[1]

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.low, self.high = math.inf, -math.inf  # the rewards seen in the measurements
        self.excess: list[float] = []  # outside the reachable returns, share of their width
        self.judged = 0

    def reachable(self) -> tuple[float, float]:
        gamma = self.context.config.gamma
        scale = 1 / (1 - gamma) if gamma < 1 else math.inf
        return min(self.low, self.low * scale), max(self.high, self.high * scale)

    def check(self, env_steps: int, stats: dict[str, float]) -> list[Finding]:
        self.low = min(self.low, stats["reward_low"])
        self.high = max(self.high, stats["reward_high"])
        low, high = self.reachable()
        width, q = high - low, stats["q_mean"]
        if not (math.isfinite(q) and math.isfinite(width)):
            return []
        width = width if width > 0 else max(abs(high), 1.0)  # one reward: its size
        keep = self.settings.measurements
        self.excess = [*self.excess, max(q - high, low - q) / width][-keep:]
        self.judged += 1
        self.record(env_steps, q_mean=float(f"{q:.4g}"), low=float(f"{low:.4g}"),
                    high=float(f"{high:.4g}"), excess=float(f"{self.excess[-1]:.3g}"))
        if len(self.excess) < keep or min(self.excess) <= self.rule.threshold or (
                self.excess[-1] <= self.excess[0]):
            return []
        found = self._finding(env_steps, q, low, high)
        self.excess = []  # the next finding needs as many measurements again
        return found

    def _finding(self, env_steps: int, q: float, low: float, high: float) -> list[Finding]:
        config = self.context.config
        library = config.library or {}
        sync = updates_per_sync(library)
        where = (f"mean Q {q:.4g} of the taken actions lies outside the discounted returns "
                 f"any policy could reach ({low:.4g}..{high:.4g}: rewards "
                 f"{self.low:.3g}..{self.high:.3g}, gamma {config.gamma:g}) by "
                 f"{self.excess[-1]:.2g} of their width, further out at each of the last "
                 f"{len(self.excess)} measurements: the Q network's targets feed on themselves")
        if sync is not None and sync < MIN_SYNC_UPDATES:
            interval = self._interval(library)
            return self.fire(
                env_steps, float(f"{self.excess[-1]:.3g}"),
                f"{where}; its target network is synced every {sync:g} updates "
                f"(target_update_interval {library.get('target_update_interval')} env steps): "
                f"it chases the online network; target_update_interval {interval}",
                suggested_set={"target_update_interval": interval})
        lr = float(library_setting(config, "learning_rate", config.critic_lr))
        proposed = float(f"{lr * LR_FACTOR:.3g}")
        return self.fire(
            env_steps, float(f"{self.excess[-1]:.3g}"),
            f"{where}; lower the learning_rate to {proposed:g} (today {lr:g})",
            suggested_set={"learning_rate": proposed})

    @staticmethod
    def _interval(library: dict[str, Any]) -> int:
        """The target_update_interval (env steps) that syncs every SYNC_UPDATES updates."""
        freq, steps = library["train_freq"][0], library["gradient_steps"]
        n_envs = library.get("n_envs", 1)
        per_phase = steps if steps > 0 else freq * n_envs
        return int(math.ceil(SYNC_UPDATES * freq / per_phase)) * n_envs

    def unjudged(self) -> str | None:
        return self.waiting(self.judged, self.settings.measurements, "measurements",
                            f"one every {self.settings.every_updates} updates")

    def state_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "excess": self.excess,
                "judged": self.judged}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.low, self.high = float(state["low"]), float(state["high"])
        self.excess = [float(x) for x in state["excess"]]
        self.judged = int(state["judged"])
