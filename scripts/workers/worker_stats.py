"""What the env runners and the learner report of their pace
(scripts/workers/distributed.py).

Per runner, over its last chunk: env steps per second, CPU share, peak memory, the
share of time it waited idle for the learner to ask again (the learner starves it), its
Ray node; for the learner: updates per second and the share of time it waited for
chunks (the runners starve it), between two readings. status.json, `rltrain status` and
TensorBoard (`workers/`) show them, and each new reading goes to the health rule
`worker_starvation` (utils/diagnosis/rules/health/worker_starvation.py).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rltrain.utils.hooks.findings import Finding
from rltrain.utils.hooks.hook import Hook

MIN_WINDOW = 1.0  # seconds: the shortest span the learner's rates are measured over


class RunnerStats:
    """Each runner's env steps per second, CPU share and peak memory (over its last
    chunk), and the learner's updates per second between two readings."""

    def __init__(self, num_runners: int) -> None:
        self.steps_per_s = [0.0] * num_runners
        self.cpu_percent = [0.0] * num_runners
        self.memory_mb = [0.0] * num_runners
        self.nodes = [""] * num_runners
        self.idle_percent = [0.0] * num_runners
        self.learner_wait = 0.0  # seconds the learner waited for chunks, since the last reading
        self.learner_wait_percent = 0.0
        self.env_steps = [0] * num_runners
        self.restarts = [0] * num_runners
        self._last: tuple[float, int] | None = None
        self.updates_per_s = 0.0
        self.readings = 0  # the learner's figures measured so far (one per window)

    def record(self, runner: int, transitions: int, chunk: dict[str, Any]) -> None:
        self.env_steps[runner] += transitions
        seconds = chunk["seconds"]
        if seconds > 0:
            self.steps_per_s[runner] = transitions / seconds
            self.cpu_percent[runner] = 100 * chunk.get("cpu_seconds", 0.0) / seconds
        self.memory_mb[runner] = chunk.get("memory_mb", 0.0)
        self.nodes[runner] = chunk.get("node", "")
        busy_and_idle = seconds + chunk.get("idle_seconds", 0.0)
        if busy_and_idle > 0:
            self.idle_percent[runner] = 100 * chunk.get("idle_seconds", 0.0) / busy_and_idle

    def learner_rate(self, updates: int) -> float:
        """The learner's updates per second since the last reading at least
        `MIN_WINDOW` seconds ago (readings closer together, as the status written at a
        run's end right after a checkpoint's, keep the last figures)."""
        now = time.monotonic()
        if self._last is None:
            self._last = (now, updates)
        elif now - self._last[0] >= MIN_WINDOW:
            self.updates_per_s = (updates - self._last[1]) / (now - self._last[0])
            self.learner_wait_percent = min(100.0, 100 * self.learner_wait
                                            / (now - self._last[0]))
            self._last, self.learner_wait = (now, updates), 0.0
            self.readings += 1
        return self.updates_per_s

    def summary(self, updates: int) -> dict[str, Any]:
        return {"learner_updates_per_s": round(self.learner_rate(updates), 2),
                "learner_waiting_percent": round(self.learner_wait_percent, 1),
                "runners": [{"runner": i, "env_steps_per_s": round(self.steps_per_s[i], 1),
                             "cpu_percent": round(self.cpu_percent[i], 1),
                             "idle_percent": round(self.idle_percent[i], 1),
                             "memory_mb": round(self.memory_mb[i], 1),
                             "env_steps": self.env_steps[i], "restarts": self.restarts[i],
                             "node": self.nodes[i]}
                            for i in range(len(self.steps_per_s))]}


# A new reading of the pace judged: (env steps, learner waiting %, runners' idle %).
PaceCheck = Callable[[int, float, list[float]], list[Finding]]


class RunnerMetrics(Hook):
    """The runners' and the learner's throughput in TensorBoard (`workers/`), every
    `log_freq` env steps; each new reading of the pace judged by `judge` (the health
    rules' `check_pace`), whose findings go to the monitor as any hook's."""

    name = "workers"

    def __init__(self, collector: Any, logger: Any, log_freq: int,
                 judge: PaceCheck | None = None) -> None:
        self.collector, self.logger, self.log_freq = collector, logger, log_freq
        self.step_end_every = log_freq
        self.judge = judge
        self.judged = 0  # the readings judged so far

    def on_step_end(self, env_steps: int) -> list[Finding]:
        if env_steps % self.log_freq != 0:
            return []
        self.logger.scalars(env_steps, self.collector.scalars())
        stats = self.collector.stats
        if self.judge is None or stats.readings == self.judged:  # no new window yet
            return []
        self.judged = stats.readings
        return self.judge(env_steps, stats.learner_wait_percent, list(stats.idle_percent))
