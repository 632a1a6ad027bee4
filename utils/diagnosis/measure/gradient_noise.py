"""The networks' gradient noise against its signal: what a batch of `batch_size` gives.

A batch's gradient is the mean of its transitions' gradients: its expected squared norm
is |G|^2 + tr(S) / b for batch size b, with G the true gradient and S the per-sample
covariance (McCandlish et al., 2018, "An Empirical Model of Large-Batch Training").
From a network's gradient on a large batch (`LARGE` transitions) and on `SMALL`-sized
parts of it, both unknowns follow, and tr(S) / |G|^2 is the "noise scale": the batch
size at which noise and signal are equal. A batch far smaller than it steps mostly on
noise. Each is summed over the measurements before they are divided, as McCandlish et
al. advise: one measurement's |G|^2 is a small difference of large numbers; a sum that
is not yet positive is not judged. Measured for the critic (its TD loss) and the actor
(its policy loss): with Adam, an actor stepping on noise walks at random, often into the
saturated ends of its tanh, where no gradient reaches it any more.

The transitions are the replay buffer's newest (no random draw from the run's streams),
split into interleaved parts so that each part spans the whole window, and the gradients
come from the agent's probe (agents/probes.py: the critic's loss and its per-layer
gradient norms, no optimiser step).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from rltrain.utils.diagnosis.rules import gradient_noise as rule
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import Batch, ReplayBuffer

LARGE = 1024  # transitions of the large batch
SMALL = 8  # transitions of each small batch
PARTS = 16  # small batches per measurement


def squared_norm(layers: dict[str, float | None]) -> float:
    return float(sum((v or 0.0) ** 2 for v in layers.values()))


def noise_terms(probe: Callable[[Batch], Any], batch: Batch) -> dict[str, tuple[float, float]]:
    """Per network ("critic", "actor"): (|G|^2, tr(S)) estimated from its gradient on
    `batch` and on PARTS interleaved parts of SMALL of its transitions."""
    first = probe(batch)
    large = {"critic": squared_norm(first.critic_layers),
             "actor": squared_norm(first.actor_layers)}
    rows = len(batch.obs)
    stride = rows // SMALL
    small = dict.fromkeys(large, 0.0)
    for part in range(PARTS):
        idx = torch.arange(part % stride, rows, stride, device=batch.obs.device)[:SMALL]
        result = probe(Batch(*(c[idx] for c in batch)))
        small["critic"] += squared_norm(result.critic_layers) / PARTS
        small["actor"] += squared_norm(result.actor_layers) / PARTS
    return {net: ((rows * large[net] - SMALL * small[net]) / (rows - SMALL),
                  (small[net] - large[net]) / (1.0 / SMALL - 1.0 / rows)) for net in large}


class GradientNoise:
    """Every `every_updates` updates: the noise terms of both networks on the buffer's
    newest LARGE rows, summed since the run began, the noise scales they give over the
    run's batch size, logged (flow1.jsonl's "gradient_noise" lines) and judged by the
    rule (the larger of the two networks')."""

    NETS = ("critic", "actor")

    def __init__(self, context: RuleContext, buffer: ReplayBuffer, logger: RunLogger,
                 report: Callable[[list[Finding]], None]) -> None:
        self.view, self.buffer, self.logger, self.report = context.view, buffer, logger, report
        self.rule = rule.GradientNoise(context)
        self.batch_size = context.config.batch_size
        self.sums = {net: [0.0, 0.0] for net in self.NETS}  # summed |G|^2 and tr(S)
        self.measured = 0

    def after_update(self, env_steps: int, updates: int) -> None:
        settings = self.rule.settings
        if (updates % settings.every_updates or len(self.buffer) < LARGE or self.view is None
                or self.rule.rule.action == "off"):
            return
        for net, (signal, noise) in noise_terms(self.view.probe,
                                                self.buffer.newest(LARGE)).items():
            self.sums[net][0] += signal
            self.sums[net][1] += noise
        self.measured += 1
        scales = {net: noise / signal for net, (signal, noise) in self.sums.items()
                  if signal > 0 and noise == noise}
        self.logger.diagnostic("gradient_noise", env_steps, updates=updates,
                               measurements=self.measured,
                               **{f"{net}_over_batch": _finite(scale / self.batch_size)
                                  for net, scale in scales.items()})
        if scales:
            net = max(scales, key=scales.get)
            self.report(self.rule.check(env_steps, scales[net] / self.batch_size,
                                        scales[net], self.measured, net))

    def unjudged(self) -> dict[str, str]:
        why = self.rule.waiting(self.measured, self.rule.settings.measurements,
                                "measurements",
                                f"one every {self.rule.settings.every_updates} updates")
        return {} if why is None else {self.rule.spec.name: why}

    def state_dict(self) -> dict[str, Any]:
        return {"sums": {net: list(v) for net, v in self.sums.items()},
                "measured": self.measured}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for net in self.NETS:
            self.sums[net] = [float(v) for v in state["sums"][net]]
        self.measured = int(state["measured"])


def _finite(value: float) -> float | None:
    return round(value, 4) if value == value and abs(value) != float("inf") else None
