"""The monitor a watched run's Session (session.py) owns: rltrain's `TrainingMonitor`
(utils/run/monitor.py) adapted to another library's loop, whose checkpoints are the
library's own (`Saver`), whose evaluations the Session runs or is handed, and whose due
work is judged over a span of env steps. `LibraryNoise` is the library's exploration
scale as the metrics hook reads it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from rltrain.utils.config.schema import TrainConfig
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.run.monitor import TrainingMonitor
from rltrain.utils.run.progress import say

# (run paths, "best" or "paused", env steps) -> the checkpoint written
Saver = Callable[[RunPaths, str, int], Path]


class LibraryNoise:
    """What the metrics hook logs as train/exploration_noise: the library's own scale."""

    def __init__(self, sigma: float) -> None:
        self._sigma = sigma

    def sigma(self, env_steps: int) -> float:
        return self._sigma


class _Evaluations:
    """What the monitor evaluates with; the library's checkpoints are `LibraryMonitor`'s."""

    def __init__(self, evaluate: Callable[[], EvalResult]) -> None:
        self.evaluate = evaluate

    def state_dict(self, kind: str) -> dict[str, Any]:
        raise AssertionError("the library's own save writes the checkpoints")


class LibraryMonitor(TrainingMonitor):
    """The TrainingMonitor with the library's checkpoints (`save`) in place of rltrain's,
    and its due work judged over a span of env steps (a vector step adds several)."""

    def __init__(self, config: TrainConfig, paths: RunPaths, logger: RunLogger,
                 evaluate: Callable[[], EvalResult], save: Saver) -> None:
        super().__init__(config, paths, logger, _Evaluations(evaluate), say)
        self._save = save

    def checkpoint(self, kind: str, env_steps: int) -> Path:
        path = self._save(self.paths, kind, env_steps)
        if kind != "best":
            self.latest_checkpoint = str(path)
        self.hooks.on_checkpoint(kind, path, env_steps)
        return path

    def due(self, before: int, now: int, can_evaluate: bool, requests: bool = True) -> None:
        """An evaluation when a multiple of eval_freq lies in (before, now]; a request
        from `rltrain pause` (`requests`: looked for now, as the loop runs, not for
        steps told after the fact). No periodic checkpoints: the library has its own."""
        if can_evaluate and now // self.config.eval_freq > before // self.config.eval_freq:
            self.evaluate(now)
        if requests and os.path.exists(self._request_file):
            self._outside_request(now)
