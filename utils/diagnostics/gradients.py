"""Gradient flow (section 3.3 of the flow-1 doc): per-layer gradient norms and their verdicts.

Norms are read from `.grad` after an update every `grad_freq` updates (cheap: nothing is
recomputed). Clipping scales all of a network's gradients by one factor, so the norm
before clipping is the norm read times (global norm before / global norm after). A
reward drop triggers a trace: the newest replay batch and the parameters go to
`critical_snapshot_step_<N>.pt`, and the per-layer norms of a fresh probe on that batch,
each with a verdict, to `grad_trace_step_<N>.json`.

The document's health table (absolute ranges per layer, for PPO-style nets with one
loss) does not transfer to DDPG, whose critic gradient scales with the reward and
whose actor gradient shrinks as the policy converges. The verdicts are calibrated on
healthy runs instead (README): `vanishing_gradient` compares a layer with the
strongest layer of its own network (the gradient does not reach it), and
`exploding_gradient` compares a layer with its own recent history.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

HISTORY = 20


def pre_clip(layers: dict[str, float | None],
             pre_clip_total: float | None) -> dict[str, float | None]:
    """Per-layer norms before clipping, from norms read after it."""
    post = sum((v or 0.0) ** 2 for v in layers.values()) ** 0.5
    if pre_clip_total is None or post == 0:
        return dict(layers)
    scale = pre_clip_total / post
    return {k: (None if v is None else v * scale) for k, v in layers.items()}


class GradientVerdicts:
    """Verdicts per layer: broken, vanishing, exploding (history-relative), or ok."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.history: dict[str, deque[float]] = {}

    def verdict(self, name: str, norm: float | None, strongest: float) -> str:
        s = self.settings
        if norm is None or norm == 0.0:
            return "broken"
        if strongest > 0 and norm / strongest < s.vanishing_gradient.threshold:
            return "vanishing"
        past = self.history.get(name)
        if past and len(past) >= 5 and norm > s.exploding_gradient.threshold * np.median(past):
            return "exploding"
        return "ok"

    def review(self, network: str, layers: dict[str, float | None]) -> dict[str, str]:
        """Verdict of every layer of `network`; then remember the norms as history."""
        strongest = max((v for v in layers.values() if v), default=0.0)
        verdicts = {name: self.verdict(f"{network}.{name}", norm, strongest)
                    for name, norm in layers.items()}
        for name, norm in layers.items():
            if norm:
                self.history.setdefault(f"{network}.{name}", deque(maxlen=HISTORY)).append(norm)
        return verdicts

    def state_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in self.history.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = {k: deque(v, maxlen=HISTORY) for k, v in state.items()}


def relative_norm(layers: dict[str, float | None], params: dict[str, float]) -> float:
    """Global gradient norm over global parameter norm (a scale-free size of a step)."""
    grad = sum((v or 0.0) ** 2 for v in layers.values()) ** 0.5
    weight = sum(v ** 2 for v in params.values()) ** 0.5
    return grad / weight if weight > 0 else 0.0


class DropDetector:
    """A value falling more than `drop` of |baseline| below its moving baseline (sign-aware)."""

    def __init__(self, drop: float, alpha: float = 0.1) -> None:
        self.drop, self.alpha = drop, alpha
        self.baseline: float | None = None

    def update(self, value: float) -> float | None:
        """Feed a value; return the baseline it dropped below, or None."""
        baseline = self.baseline
        self.baseline = value if baseline is None else (1 - self.alpha) * baseline + \
            self.alpha * value
        if baseline is not None and value < baseline - self.drop * abs(baseline):
            return baseline
        return None
