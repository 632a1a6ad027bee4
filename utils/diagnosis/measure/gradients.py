"""Gradient flow: per-layer gradient norms and their verdicts.

Norms are read after an update every `grad_freq` updates, from `.grad` or, where the
view records them, from the gradients each optimiser stepped with (cheap: nothing is
recomputed). Clipping scales all of a network's gradients by one factor, so the norm
before clipping is the norm read times (global norm before / global norm after). A
reward drop triggers a trace: the newest replay batch and the parameters go to
`critical_snapshot_step_<N>.pt`, and the per-layer norms of a fresh probe on that batch,
each with a verdict, to `grad_trace_step_<N>.json`. Traces are kept as checkpoints are:
the newest `keep_traces`, and the run's first (where its returns first fell, the
`first_step` of `rltrain diagnose`'s reward_drop note); the others are deleted.

A textbook health table (absolute ranges per layer, for PPO-style nets with one loss)
does not transfer to DDPG, whose critic gradient scales with the reward and whose actor
gradient shrinks as the policy converges. The verdicts are calibrated on healthy runs
instead (see the docs' page on diagnosing a run): `vanishing_gradient` compares a weight
matrix with the strongest weight matrix of its own network but its output layers (the
gradient does not reach it; biases, some with a single element, are too noisy for this;
an output layer's norm scales with the loss's error, not with how the gradient flows;
output layers are those with the fewest rows), and
`exploding_gradient` compares a layer with its own recent history, above an absolute
floor (a norm of 5).
That history is of norms divided by the largest |reward| seen so far: both networks'
gradients scale with the rewards, so a reward first found after a long near-zero phase
(MountainCar's +100 goal after action costs of 0.1) raises them 1000x without anything
being unstable; an explosion is growth the reward scale does not explain.
"""

from __future__ import annotations

import math
import re
from collections import deque
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from rltrain.utils.diagnosis.rules import gradient_rules
from rltrain.utils.diagnosis.rules._probe import saturated_share
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.findings import Finding
from rltrain.utils.io.checkpoint import save_tensors, write_json
from rltrain.utils.run.folders import RunPaths
from rltrain.utils.run.logger import RunLogger
from rltrain.utils.training.replay_buffer import ReplayBuffer

HISTORY = 20
TRACE_FILE = re.compile(r"^(?:grad_trace_step_(\d+)\.json|critical_snapshot_step_(\d+)\.pt)$")


def total_norm(layers: dict[str, float | None]) -> float:
    return float(sum((v or 0.0) ** 2 for v in layers.values()) ** 0.5)


def layer_norms(net: nn.Module,
                grads: dict[str, torch.Tensor | None] | None = None) -> dict[str, float | None]:
    """Gradient norm of every parameter of `net` (None where there is no gradient):
    from `grads` by parameter name where given, else from `.grad`."""
    if grads is None:
        grads = {name: p.grad for name, p in net.named_parameters()}
    present = [torch.linalg.vector_norm(g) for g in grads.values() if g is not None]
    norms = iter(torch.stack(present).tolist() if present else [])
    return {name: (next(norms) if g is not None else None) for name, g in grads.items()}


def network_gradients(view: Any, name: str) -> dict[str, torch.Tensor | None]:
    """The gradients of the view's network `name` ("actor", "critic") by parameter name:
    as its optimiser stepped with them where the view records that, else `.grad`."""
    if view.step_gradients is not None:
        stepped = view.step_gradients(name)
        if stepped is not None:
            return stepped
    return {key: p.grad for key, p in getattr(view, name).named_parameters()}


def pre_clip(layers: dict[str, float | None],
             pre_clip_total: float | None) -> dict[str, float | None]:
    """Per-layer norms before clipping, from norms read after it."""
    post = total_norm(layers)
    if pre_clip_total is None or post == 0:
        return dict(layers)
    scale = pre_clip_total / post
    return {k: (None if v is None else v * scale) for k, v in layers.items()}


class GradientVerdicts:
    """Verdicts per layer: broken, vanishing, exploding (history-relative), or ok."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.history: dict[str, deque[float]] = {}
        self.below: set[str] = set()  # the layers below the vanishing share at the last read

    def verdict(self, name: str, norm: float | None, strongest: float,
                reward_scale: float = 1.0) -> str:
        """`strongest`: the largest weight-matrix gradient norm of the same network;
        `reward_scale`: the largest |reward| so far (1 before any reward)."""
        return gradient_rules.verdict(self.settings, name, norm, strongest,
                                      self.history.get(name), reward_scale)

    def review(self, network: str, layers: dict[str, float | None],
               reward_scale: float = 1.0,
               outputs: frozenset[str] = frozenset()) -> dict[str, str]:
        """Verdict of every layer of `network`; then remember the norms (over the reward
        scale) as history. A layer is vanishing only at the second read in a row below
        the share: one read is often a passing state (MountainCar's actor, while the car
        stands still, passes its gradient through a single unit for a moment).
        `outputs`: the network's output layers' weights (`output_weights`)."""
        strongest = strongest_weight(layers, outputs)
        verdicts = {name: self.verdict(f"{network}.{name}", norm, strongest, reward_scale)
                    for name, norm in layers.items()}
        for name, found in verdicts.items():
            key = f"{network}.{name}"
            if found != "vanishing":
                self.below.discard(key)
            elif key not in self.below:  # the first read below: remember it, judge the next
                self.below.add(key)
                verdicts[name] = "ok"
        for name, norm in layers.items():
            if norm:
                self.history.setdefault(f"{network}.{name}", deque(maxlen=HISTORY)).append(
                    norm / reward_scale)
        return verdicts

    def state_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in self.history.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = {k: deque(v, maxlen=HISTORY) for k, v in state.items()}


def scale_of(max_abs_reward: float) -> float:
    """The reward scale gradient norms are compared in: the largest |reward| so far."""
    return max_abs_reward if max_abs_reward > 0 else 1.0


def strongest_weight(layers: dict[str, float | None],
                     outputs: frozenset[str] = frozenset()) -> float:
    """The largest gradient norm of the network's weights but its output layers' (all of
    them where nothing else is left): an output layer's gradient is the loss's error
    times the last features, and scales with that error (a value head fit to
    unnormalised returns of hundreds), not with how well the gradient passes through
    the body."""
    weights = {k: v for k, v in layers.items() if k.endswith("weight") and v}
    hidden = [v for k, v in weights.items() if k not in outputs]
    return max(hidden or weights.values(), default=0.0)


def output_weights(net: nn.Module) -> frozenset[str]:
    """The weight matrices of a network's output layers, found by their shape: those
    with the fewest rows (a critic's 1, an actor's action dimensions, a policy's
    logits, every head of twin critics), where hidden layers have more."""
    shapes = {name: p.shape[0] for name, p in net.named_parameters()
              if name.endswith("weight") and p.dim() == 2}
    if len(set(shapes.values())) < 2:
        return frozenset()
    fewest = min(shapes.values())
    return frozenset(name for name, rows in shapes.items() if rows == fewest)


def relative_norm(layers: dict[str, float | None], net: torch.nn.Module) -> float:
    """Global gradient norm over global parameter norm (a scale-free size of a step)."""
    with torch.no_grad():  # one host transfer for all parameters
        weight = float(torch.nn.utils.get_total_norm(list(net.parameters())))
    return total_norm(layers) / weight if weight > 0 else 0.0


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


class GradientWatch:
    """Records per-layer gradient norms after updates and traces them after reward drops."""

    def __init__(self, context: RuleContext, buffer: ReplayBuffer, logger: RunLogger,
                 paths: RunPaths, report: Callable[[list[Finding]], None]) -> None:
        config = context.config
        self.agent, self.buffer, self.settings = context.view, buffer, config.diagnostics
        self.batch_size = config.batch_size
        self.logger, self.paths, self.report = logger, paths, report
        self.verdicts = GradientVerdicts(self.settings)
        self.layer_rules = [cls(context) for cls in gradient_rules.LAYER_RULES]
        self.imbalance = gradient_rules.ValuePolicyImbalance(context)
        self.last_trace: int | None = None

    def record(self, env_steps: int, actor_pre_clip: float | None,
               critic_pre_clip: float | None, max_abs_reward: float) -> None:
        """Norms of the gradients each network was stepped with (`network_gradients`),
        rescaled to before clipping."""
        agent = self.agent
        grads = {name: network_gradients(agent, name) for name in ("actor", "critic")}
        actor = pre_clip(layer_norms(agent.actor, grads["actor"]), actor_pre_clip)
        critic = pre_clip(layer_norms(agent.critic, grads["critic"]), critic_pre_clip)
        scalars = {f"gradients/actor/{k}": v for k, v in actor.items() if v is not None}
        scalars.update({f"gradients/critic/{k}": v for k, v in critic.items() if v is not None})
        self.logger.scalars(env_steps, scalars)
        for name, named in grads.items():
            flat = [g.flatten() for g in named.values() if g is not None]
            if flat:
                self.logger.histogram(f"gradients/{name}", torch.cat(flat), env_steps)
        balance = self._imbalance(actor, critic)
        scale = scale_of(max_abs_reward)
        self.logger.diagnostic("gradients", env_steps, actor=actor, critic=critic,
                               imbalance=balance, reward_scale=scale)
        verdicts = {"actor": self.verdicts.review("actor", actor, scale,
                                                  output_weights(agent.actor)),
                    "critic": self.verdicts.review("critic", critic, scale,
                                                   output_weights(agent.critic))}
        self._findings(env_steps, verdicts, {"actor": actor, "critic": critic}, balance)

    def _imbalance(self, actor: dict, critic: dict) -> float:
        """The critic's relative gradient over the actor's: inf when only the actor gets
        none (its tanh saturated, say), 0 when neither does."""
        actor_rel = relative_norm(actor, self.agent.actor)
        critic_rel = relative_norm(critic, self.agent.critic)
        if actor_rel > 0:
            return critic_rel / actor_rel
        return math.inf if critic_rel > 0 else 0.0

    def _findings(self, env_steps: int, verdicts: dict, norms: dict, balance: float) -> None:
        for rule in self.layer_rules:
            layers = {f"{net}.{name}": norms[net][name] for net, found in verdicts.items()
                      for name, v in found.items() if v == rule.verdict}
            self.report(rule.check(env_steps, layers))
        self.report(self.imbalance.check(env_steps, balance, self._saturation))

    def _saturation(self) -> float:
        """The share of the policy's actions on the newest batch's states at a bound of
        the action range (0 with nothing to read)."""
        if not len(self.buffer):
            return 0.0
        return saturated_share(self.agent, self.buffer.newest(self.batch_size).obs)

    def trace(self, env_steps: int, reason: str, cooldown: int, max_abs_reward: float) -> None:
        """Snapshot the newest batch and parameters; write per-layer norms and verdicts."""
        if not len(self.buffer) or (self.last_trace is not None
                                    and env_steps - self.last_trace < cooldown):
            return
        self.last_trace = env_steps
        batch = self.buffer.newest(self.batch_size)
        probe = self.agent.probe(batch)
        layers = {}
        skip = set(getattr(self.agent, "unprobed", ()))
        for net, norms in (("actor", probe.actor_layers), ("critic", probe.critic_layers)):
            norms = {k: v for k, v in norms.items() if f"{net}.{k}" not in skip}
            strongest = strongest_weight(norms, output_weights(getattr(self.agent, net)))
            layers[net] = {k: {"norm": v, "verdict": self.verdicts.verdict(
                f"{net}.{k}", v, strongest, scale_of(max_abs_reward))} for k, v in norms.items()}
        folder = self.paths.log_dir / "traces"
        trace_file = folder / f"grad_trace_step_{env_steps}.json"
        write_json(trace_file, {"env_steps": env_steps, "reason": reason,
                                "critic_loss": probe.critic_loss,
                                "actor_loss": probe.actor_loss, "q_mean": probe.q_mean,
                                "layers": layers})
        snapshot = {"env_steps": env_steps, "reason": reason, "batch": batch._asdict(),
                    **{k: net.state_dict() for k, net in self.agent.networks().items()}}
        save_tensors(folder / f"critical_snapshot_step_{env_steps}.pt", snapshot)
        prune_traces(folder, self.settings.keep_traces)
        self.logger.diagnostic("trace", env_steps, reason=reason, file=str(trace_file))
        for rule in (r for r in self.layer_rules if r.in_trace):
            found = [f"{n}.{k}" for n, per in layers.items() for k, v in per.items()
                     if v["verdict"] == rule.verdict]
            self.report(rule.check_trace(env_steps, found, reason))

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.verdicts.state_dict(), "last_trace": self.last_trace,
                "vanishing": sorted(self.verdicts.below)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.verdicts.load_state_dict(state["history"])
        self.verdicts.below = set(state.get("vanishing", ()))  # absent before it was kept
        self.last_trace = state["last_trace"]


def prune_traces(folder: Path, keep: int) -> None:
    """Delete the files of every trace in `folder` but the first and the newest `keep`
    (a trace: its `grad_trace_step_<N>.json` and `critical_snapshot_step_<N>.pt`)."""
    files: dict[int, list[Path]] = {}
    for path in folder.iterdir():
        match = TRACE_FILE.match(path.name)
        if match and path.is_file():
            files.setdefault(int(match.group(1) or match.group(2)), []).append(path)
    steps = sorted(files)
    for step in steps[1:-keep]:
        for path in files[step]:
            path.unlink(missing_ok=True)
