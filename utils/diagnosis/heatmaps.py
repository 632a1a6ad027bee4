"""HeatmapWriter: what each of the state-action map's heatmaps writes and finds, for the
flow-1 hook (watch.py), which decides when one is due.

A heatmap clusters the map's latest samples (measure/state_action.py) and writes the
clusters (`heatmaps/clusters_step_<N>.json`), its scalars and its flow1.jsonl line; the
cluster rules and `action_saturation` judge it. Its picture (report/heatmap_image.py) is drawn
only within `diagnostics.heatmap_time_share` of the run's time; the clusters and
findings are made at every heatmap.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from rltrain.utils.diagnosis.measure.state_action import ClusterView, StateActionMap
from rltrain.utils.diagnosis.report import heatmap_image
from rltrain.utils.diagnosis.rules import state_action_rules
from rltrain.utils.diagnosis.rules.critic_rules import ActionSaturation
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.io.checkpoint import write_json
from rltrain.utils.run.logger import RunLogger


class HeatmapWriter:
    """The heatmaps of one run's state-action map, in `folder`; findings go to `report`.
    Its callers time it (the hook's `seconds` counts the heatmaps' work)."""

    def __init__(self, context: RuleContext, state_action: StateActionMap, folder: Path,
                 logger: RunLogger, low: np.ndarray, high: np.ndarray,
                 saturated: ActionSaturation, report: Callable[[list[Finding]], None]) -> None:
        """`saturated`: the `action_saturation` check (the hook's, with the critic's)."""
        self.config, self.settings = context.config, context.config.diagnostics
        self.map, self.folder, self.logger = state_action, folder, logger
        self.low, self.high = low, high
        self.cluster_rules = {cls.spec.name: cls(context) for cls in state_action_rules.CHECKS}
        self.saturated = saturated
        self.report = report
        self.drawn: tuple[float, float] | None = None  # the last picture: its end, its cost

    def write(self, env_steps: int) -> None:
        """The heatmap of step `env_steps`: its clusters, scalars and findings, and its
        picture where one is due."""
        view = self.map.analyse(env_steps)
        folder = self.folder
        drawn = self._draw_due()
        if drawn:
            start = time.perf_counter()
            png, height, width = heatmap_image.heatmap(
                view, folder / f"heatmap_step_{env_steps}.png", self.low, self.high)
            self.logger.image("flow1/heatmap", png, height, width, env_steps)
            end = time.perf_counter()
            self.drawn = (end, end - start)
        # Actions at the bounds of a Box; none where its rule does not judge the algorithm
        # (a Discrete action space has no bounds to saturate).
        saturated = self.saturated
        saturation = (self.map.saturation() if saturated.spec.judges(self.config.algo)
                      else None)
        clusters = view.summary()
        write_json(folder / f"clusters_step_{env_steps}.json", clusters)
        self.logger.scalars(env_steps, {"flow1/sample_rate": self.map.sample_rate(),
                                        **({} if saturation is None else
                                           {"flow1/action_saturation": saturation})})
        self.logger.diagnostic("heatmap", env_steps, action_saturation=saturation,
                               png=str(folder / f"heatmap_step_{env_steps}.png") if drawn
                               else None,
                               verdicts={k: len(v) for k, v in view.verdicts.items()})
        self._cluster_findings(env_steps, view)
        if saturation is not None:
            self.report(saturated.check(env_steps, saturation))

    def _draw_due(self) -> bool:
        """Whether this heatmap's picture is drawn: the first always; a later one where
        the time since the last picture is at least its cost over heatmap_time_share
        (a fast env, of tens of thousands of steps a second, reaches heatmap_freq faster
        than a picture and its PNG are worth)."""
        share = self.settings.heatmap_time_share
        if self.drawn is None or share >= 1:
            return True
        end, cost = self.drawn
        return time.perf_counter() - end >= cost / share

    def _cluster_findings(self, env_steps: int, view: ClusterView) -> None:
        for rule, found in view.verdicts.items():
            self.report(self.cluster_rules[rule].check(env_steps, found, view.dropped,
                                                       len(view.counts)))
