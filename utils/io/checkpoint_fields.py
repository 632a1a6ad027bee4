"""Every field rltrain reads from a checkpoint, checked before anything uses it.

A checkpoint may come from anywhere (a colleague, a download, an edit): `weights_only`
loading keeps code out of it, and this module keeps its values in range. Types, ranges
and consistency with its own tensors (twin networks of one shape, a replay buffer that
fits its counters and its env's spaces) are checked when the file is loaded, before
`resume` or `eval` touches any file; a bad field is one `CheckpointError` naming it.
The config it holds is validated as a config file is, by its consumers.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rltrain.agents.gemm import GEMMS
from rltrain.utils.errors import CheckpointError

MAX_STEPS = 2**63 - 1  # env steps are counted in int64 wherever torch or NumPy hold them
KINDS = ("best", "periodic", "paused")
NETWORKS = ("actor", "critic", "actor_target", "critic_target")  # those a checkpoint has
OPTIMIZERS = ("actor_optimizer", "critic_optimizer")


def check_fields(data: dict[str, Any], path: object,
                 counters: tuple[str, ...] = ()) -> None:
    """Raise a `CheckpointError` for the first field of `data` that is not as rltrain
    writes it. `counters`: the names of the integer counters the algorithm's networks
    keep (agents/base.py `Implementation.network_counters`); every other tensor of a
    network is floating-point."""
    fields = _Fields(data, path)
    _check_dense(fields, data, "")
    steps = fields.integer("total_steps", data["total_steps"], 0, MAX_STEPS)
    if data.get("kind") not in KINDS:
        raise fields.bad("kind", data.get("kind"), f"one of {', '.join(KINDS)}")
    fields.of_type("config", data["config"], dict, "a mapping")
    if "gemm" in data and data["gemm"] not in GEMMS:  # a fused update's kernel
        raise fields.bad("gemm", data["gemm"], f"one of {', '.join(GEMMS)}")
    for key in ("run_name", "log_dir", "checkpoint_dir", "rltrain_version"):
        if key in data and (not isinstance(data[key], str) or not data[key]):
            raise fields.bad(key, data[key], "a non-empty string")
    if "run_name" in data and not _plain_name(data["run_name"]):
        raise fields.bad("run_name", data["run_name"], "a plain folder name")
    obs_dim, action_dim = _check_spaces(fields, data.get("spaces"))
    _check_networks(fields, data, data["spaces"], counters)
    _check_generators(fields, data)
    if data.get("normalize") is not None:  # absent from checkpoints written before it
        _check_normalize(fields, data["normalize"], obs_dim)
    if data["kind"] != "best":
        _check_buffer(fields, data.get("buffer"), steps, 2 * obs_dim + action_dim + 2)
        _check_trainer(fields, data.get("trainer"), steps)
        _check_monitor(fields, data["trainer"].get("monitor"), steps)
        _check_map(fields, (data["trainer"].get("diagnostics") or {}).get("map"), obs_dim,
                   action_dim)


class _Fields:
    """The checks' shared wording: `checkpoint 'P': field 'F' is V; it must be ...`."""

    def __init__(self, data: dict[str, Any], path: object) -> None:
        self.data, self.path = data, path

    def bad(self, field: str, value: Any, must: str) -> CheckpointError:
        shown = repr(value) if not isinstance(value, torch.Tensor) else \
            f"a tensor of shape {tuple(value.shape)}"
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return CheckpointError(f"checkpoint '{self.path}' is refused: its field '{field}' is "
                               f"{shown}; it must be {must}")

    def number(self, field: str, value: Any, none: bool = False) -> None:
        """A number (NaN included: an evaluation of a diverged policy returns one)."""
        if value is None and none:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.bad(field, value, "a number" + (" or null" if none else ""))

    def tensor(self, field: str, value: Any, shape: tuple[int, ...]) -> torch.Tensor:
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            raise self.bad(field, value, f"a tensor of shape {shape}")
        return value

    def integer(self, field: str, value: Any, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.bad(field, value, f"an integer in [{low}, {high}]")
        return value

    def of_type(self, field: str, value: Any, kind: type, must: str) -> Any:
        if not isinstance(value, kind):
            raise self.bad(field, value, must)
        return value


def _check_spaces(fields: _Fields, spaces: Any) -> tuple[int, int]:
    fields.of_type("spaces", spaces, dict, "a mapping")
    obs_dim = fields.integer("spaces.obs_dim", spaces.get("obs_dim"), 1, 2**31)
    bounds = []
    for side in ("action_low", "action_high"):
        value = spaces.get(side)
        if (not isinstance(value, list) or not value or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for v in value)):
            raise fields.bad(f"spaces.{side}", value, "a non-empty list of finite numbers")
        bounds.append(value)
    low, high = bounds
    if len(low) != len(high) or not all(h > lo for lo, h in zip(low, high, strict=True)):
        raise fields.bad("spaces.action_high", high, "above action_low, of its length")
    return obs_dim, len(low)


def _check_dense(fields: _Fields, value: Any, where: str) -> None:
    """Every tensor in the file holds the bytes its shape says: rltrain writes no tensor
    whose rows share memory (a stride-0 view can claim 10^10 rows from a few bytes, and
    anything that copies it then asks for all of them)."""
    if isinstance(value, torch.Tensor):
        need = value.numel() * value.element_size()
        if value.numel() > 1 and (not value.is_contiguous() or
                                  value.untyped_storage().nbytes() < need):
            raise fields.bad(where, value, "a dense tensor (this one's rows share memory: "
                             f"{value.untyped_storage().nbytes()} bytes stand for {need})")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_dense(fields, item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_dense(fields, item, f"{where}[{i}]")


# A torch random stream's saved state: a CPU generator's (Mersenne Twister), a CUDA one's
# (Philox seed and offset). Another size is no generator state at all.
GENERATOR_BYTES = {torch.Generator().get_state().numel(): "CPU", 16: "CUDA"}


def _check_generators(fields: _Fields, data: dict[str, Any]) -> None:
    found = [(key, value) for key, value in data.items() if key.endswith("_generator")]
    if isinstance(data.get("buffer"), dict) and "generator" in data["buffer"]:
        found.append(("buffer.generator", data["buffer"]["generator"]))
    rng = (data.get("trainer") or {}).get("rng") if isinstance(data.get("trainer"),
                                                                dict) else None
    if isinstance(rng, dict) and "torch" in rng:
        found.append(("trainer.rng.torch", rng["torch"]))
    sizes = " or ".join(f"{size} ({device})" for size, device in GENERATOR_BYTES.items())
    for key, value in found:
        if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or \
                value.dim() != 1 or value.numel() not in GENERATOR_BYTES:
            raise fields.bad(key, value, f"a random generator's state: {sizes} bytes")


def _check_networks(fields: _Fields, data: dict[str, Any], spaces: dict[str, Any],
                    counters: tuple[str, ...]) -> None:
    """Each network a dict of floating tensors (and of the algorithm's `counters`, each a
    count >= 0); each target of its network's shapes; the action bounds they keep
    (action_scale, action_bias) those of the env's spaces."""
    low, high = (torch.tensor(spaces[side], dtype=torch.float64)
                 for side in ("action_low", "action_high"))
    bounds = {"action_scale": (high - low) / 2, "action_bias": (high + low) / 2}
    for name in (n for n in NETWORKS if n in data):
        weights = fields.of_type(name, data[name], dict, "a mapping of tensors")
        for key, value in weights.items():
            if key.rpartition(".")[2] in counters:
                _check_counter(fields, f"{name}.{key}", value)
                continue
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                raise fields.bad(f"{name}.{key}", value, "a floating-point tensor")
            want = bounds.get(key)
            if want is not None and (value.shape != want.shape or not torch.allclose(
                    value.double(), want, rtol=1e-5, atol=1e-6)):
                raise fields.bad(f"{name}.{key}", value.tolist() if value.numel() <= 8
                                 else value, f"{want.tolist()}, from the env's action bounds "
                                 "in 'spaces'")
    for name in (n for n in ("actor", "critic") if f"{n}_target" in data):
        online, target = data[name], data[f"{name}_target"]
        shapes = {k: tuple(v.shape) for k, v in online.items()}
        if shapes != {k: tuple(v.shape) for k, v in target.items()}:
            raise fields.bad(f"{name}_target", "weights of other shapes",
                             f"of the shapes of '{name}'")
    for name in OPTIMIZERS:
        fields.of_type(name, data[name], dict, "a mapping")


def _check_counter(fields: _Fields, field: str, value: Any) -> None:
    """A network's integer counter (batch renormalisation's training passes): one count."""
    if (not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.dim() != 0
            or int(value) < 0):
        raise fields.bad(field, value, "a count: a 0-d int64 tensor >= 0")


def _check_buffer(fields: _Fields, buffer: Any, steps: int, width: int) -> None:
    """The replay buffer: its counters in range and its tensors of the size they say."""
    fields.of_type("buffer", buffer, dict, "a mapping")
    capacity = fields.integer("buffer.capacity", buffer.get("capacity"), 1, MAX_STEPS)
    size = fields.integer("buffer.size", buffer.get("size"), 0, min(capacity, steps))
    fields.integer("buffer.ptr", buffer.get("ptr"), 0, capacity - 1)
    fields.integer("buffer.width", buffer.get("width"), width, width)
    rows = buffer.get("data")
    if not isinstance(rows, torch.Tensor) or tuple(rows.shape) != (size, width):
        raise fields.bad("buffer.data", rows, f"a tensor of shape ({size}, {width})")
    truncated = buffer.get("truncated")
    if not isinstance(truncated, torch.Tensor) or tuple(truncated.shape) != (size,):
        raise fields.bad("buffer.truncated", truncated, f"a tensor of shape ({size},)")


def _check_trainer(fields: _Fields, trainer: Any, steps: int) -> None:
    """The counters the run continues from: of the checkpoint's own step."""
    fields.of_type("trainer", trainer, dict, "a mapping")
    counters = fields.of_type("trainer.counters", trainer.get("counters"), dict, "a mapping")
    fields.integer("trainer.counters.env_steps", counters.get("env_steps"), steps, steps)
    fields.integer("trainer.counters.episodes", counters.get("episodes"), 0, steps)
    last = counters.get("last_return")
    if last is not None and (isinstance(last, bool) or not isinstance(last, (int, float))):
        raise fields.bad("trainer.counters.last_return", last, "a number or null")
    fields.integer("trainer.counters.last_non_finite_rewards",
                   counters.get("last_non_finite_rewards", 0), 0, steps)


def _check_monitor(fields: _Fields, monitor: Any, steps: int) -> None:
    """The evaluations' record: counts in range, returns numbers (or none yet)."""
    fields.of_type("trainer.monitor", monitor, dict, "a mapping")
    evaluations = fields.integer("trainer.monitor.evaluations", monitor.get("evaluations"), 0,
                                 MAX_STEPS)
    for key in ("latest_eval", "best_eval"):
        fields.number(f"trainer.monitor.{key}", monitor.get(key), none=True)
    if monitor.get("best_eval_step") is not None:
        fields.integer("trainer.monitor.best_eval_step", monitor["best_eval_step"], 0, steps)
    fields.integer("trainer.monitor.evals_since_best", monitor.get("evals_since_best"), 0,
                   evaluations)
    for key in ("last_warned", "held_back"):
        fields.of_type(f"trainer.monitor.{key}", monitor.get(key, {}), dict, "a mapping")


def _check_map(fields: _Fields, state: Any, obs_dim: int, action_dim: int) -> None:
    """The state-action samples of the flow-1 heatmaps: tensors of the size, widths and
    ring positions the map continues from."""
    if state is None:  # diagnostics off
        return
    name = "trainer.diagnostics.map"
    fields.of_type(name, state, dict, "a mapping")
    size = fields.integer(f"{name}.size", state.get("size"), 0, MAX_STEPS)
    fields.tensor(f"{name}.states", state.get("states"), (size, obs_dim))
    fields.tensor(f"{name}.actions", state.get("actions"), (size, action_dim))
    fields.tensor(f"{name}.return_to_go", state.get("return_to_go"), (size,))
    fields.integer(f"{name}.ptr", state.get("ptr"), 0, size)
    fields.integer(f"{name}.recent", state.get("recent"), 0, size)
    rows = state.get("episode_rows")
    if not isinstance(rows, list) or not all(
            isinstance(env_rows, list) and all(
                isinstance(row, (list, tuple)) and len(row) == 2 and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in row)
                and 0 <= row[0] < max(size, 1) and row[1] >= 0 for row in env_rows)
            for env_rows in rows):
        raise fields.bad(f"{name}.episode_rows", rows,
                         f"lists of (row, step) pairs, rows in [0, {size})")
    centers = state.get("centers")
    if centers is not None:
        if not isinstance(centers, torch.Tensor) or centers.dim() != 2:
            raise fields.bad(f"{name}.centers", centers, "a 2-d tensor or null")
        counts = state.get("center_counts")
        if counts is not None:
            fields.tensor(f"{name}.center_counts", counts, (len(centers),))


def _check_normalize(fields: _Fields, state: Any, obs_dim: int) -> None:
    """utils/training/normalize.py's running statistics: of the env's observation size (or not
    started: one number), finite, variances >= 0."""
    fields.of_type("normalize", state, dict, "a mapping")
    for name, size in (("observations", obs_dim), ("returns_rms", None)):
        stats = fields.of_type(f"normalize.{name}", state.get(name), dict, "a mapping")
        fields.integer(f"normalize.{name}.count", stats.get("count"), 0, MAX_STEPS)
        for key in ("mean", "var"):
            value = stats.get(key)
            numbers = value if isinstance(value, list) else [value]
            if (not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v) and (key == "mean" or v >= 0) for v in numbers)
                    or (isinstance(value, list) and len(value) != size)):
                raise fields.bad(f"normalize.{name}.{key}", value,
                                 "a finite number" + (f" or {size} of them" if size else "")
                                 + (" >= 0" if key == "var" else ""))
    returns = state.get("returns")
    if not isinstance(returns, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in returns):
        raise fields.bad("normalize.returns", returns, "a list of numbers")


def _plain_name(name: str) -> bool:
    """A run name is one folder: no separator, no '..' (it names folders to write)."""
    return name not in (".", "..") and all(c.isalnum() or c in "-_." for c in name)
