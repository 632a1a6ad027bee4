"""The matrix products of the fused updates (agents/fused.py, agents/sac_fused.py,
agents/tqc_fused.py, agents/crossq_fused.py): torch's BLAS or oneDNN, whichever measures
faster on this machine.

torch's CPU build does its dense products with Intel's MKL, which on other vendors' CPUs
can take a slower code path (on an AMD EPYC with AVX-512 a 256x256x256 product ran at
less than half of what oneDNN, also shipped inside torch, gives it: the figures are in
benchmarks/results/). `fastest()` times both on the update's own shape, once per process
(`matmul_kernel: auto`; the config can name one), and the fused agents keep the choice in
their state_dict, so a resumed run multiplies with the kernel it started with: the choice
changes rounding, and resuming stays bit for bit. Two fresh runs on a machine where the
two kernels are about as fast can choose differently; `matmul_kernel` pins it.

oneDNN is reached through `torch.ops.mkldnn._linear_pointwise` (the op torch.compile's
CPU backend emits for a linear layer: x @ W.t() + b, ReLU fused where asked), a private
op looked up once here, and run on the CPU only; where torch lacks it, or it fails in
the measurement, the BLAS is used.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

import torch

GEMMS = ("blas", "onednn")  # the state_dict key "gemm" (agents/base.py BACKEND_KEYS)
ROWS = 256  # the batch size the shipped configs train with
MARGIN = 1.1  # oneDNN is taken only when it is at least this much faster
THIN = 32  # a product with a side under this many stays with the BLAS


def _lookup() -> Any:
    try:
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


_onednn_linear = _lookup()


class Products:
    """The three products a fused update makes: a layer's output, a product, and a product
    written into a gradient buffer. With `onednn`, the products whose every side is at
    least `THIN` go to oneDNN; thinner ones (an input layer of a few observations, a
    critic's one output) stay with the BLAS, which is faster on them. Which kernel takes
    a product depends on its shape alone, so a run's rounding is the same on resume."""

    def __init__(self, kind: str = "blas") -> None:
        if kind not in GEMMS:
            raise ValueError(f"unknown matrix-product kernel {kind!r}; one of {', '.join(GEMMS)}")
        self.kind = kind
        self._onednn = kind == "onednn"

    def _wide(self, rows: int, inner: int, cols: int) -> bool:
        return self._onednn and min(rows, inner, cols) >= THIN

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               relu: bool = False) -> torch.Tensor:
        """x @ weight + bias (weight [in, out]), through a ReLU when `relu`."""
        if self._wide(x.shape[0], *weight.shape):
            return _onednn_linear(_dense(x), _dense(weight.t()), bias.reshape(-1),
                                  "relu" if relu else "none", [], "")
        out = torch.addmm(bias, x, weight)
        return out.relu_() if relu else out

    def mm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a @ b."""
        if self._wide(*a.shape, b.shape[1]):
            return _onednn_linear(_dense(a), _dense(b.t()), None, "none", [], "")
        return torch.mm(a, b)

    def mm_into(self, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
        """out = a @ b, `out` a buffer (a gradient's view: contiguous or transposed)."""
        if not self._wide(*a.shape, b.shape[1]):
            torch.mm(a, b, out=out)
        elif out.is_contiguous():
            out.copy_(self.mm(a, b))
        else:  # the transposed view of an nn.Linear's [out, in] gradient
            out.t().copy_(self.mm(b.t(), a.t()))


def _dense(matrix: torch.Tensor) -> torch.Tensor:
    """`matrix` if it is stored row- or column-major, else a contiguous copy: oneDNN takes
    a slow path on other strides (a replay batch's columns, views of one [B, 9] block,
    made TD3's update twice as slow)."""
    if matrix.is_contiguous() or matrix.t().is_contiguous():
        return matrix
    return matrix.contiguous()


def available() -> tuple[str, ...]:
    """The kernels this torch can run."""
    if _onednn_linear is None or not torch.backends.mkldnn.is_available():
        return ("blas",)
    return GEMMS


@functools.cache
def fastest(width: int, rounds: int = 5, repeats: int = 10) -> str:
    """The kernel that multiplies a [ROWS, width] by a [width, width] matrix faster on
    this machine and thread count (alternating blocks, medians); BLAS unless oneDNN
    wins by `MARGIN`. A few tens of milliseconds, once per process and width; its
    random matrices come from a generator of its own (the global streams are a run's)."""
    if "onednn" not in available():
        return "blas"
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, width, generator=generator)
    weight = torch.randn(width, width, generator=generator)
    bias = torch.zeros(width)
    times: dict[str, list[float]] = {kind: [] for kind in GEMMS}
    try:
        for _ in range(rounds):
            for kind in GEMMS:
                products = Products(kind)
                products.linear(x, weight, bias)  # warm
                start = time.perf_counter()
                for _ in range(repeats):
                    products.linear(x, weight, bias)
                times[kind].append(time.perf_counter() - start)
    except RuntimeError:  # oneDNN cannot run here
        return "blas"
    faster = statistics.median(times["blas"]) / statistics.median(times["onednn"])
    return "onednn" if faster >= MARGIN else "blas"


def kernel_for(requested: str, device: torch.device, widths: tuple[int, ...]) -> str:
    """The kernel a fused update on `device` multiplies with for the config's
    `matmul_kernel` (`requested`): oneDNN's op runs on the CPU only, so CUDA always gets
    torch's own products. An explicit kernel this torch cannot run is a ValueError."""
    if requested not in ("auto", *GEMMS):
        raise ValueError(f"unknown matmul_kernel {requested!r}; one of auto, {', '.join(GEMMS)}")
    if device.type != "cpu":
        if requested == "onednn":
            raise ValueError("matmul_kernel onednn runs on the CPU only; use auto or blas "
                             f"on {device.type}")
        return "blas"
    if requested == "auto":
        return fastest(max(widths, default=ROWS))
    if requested not in available():
        raise ValueError(f"matmul_kernel {requested} is not available in torch "
                         f"{torch.__version__}; use auto or blas")
    return requested


class KeepsProducts:
    """For a fused agent (put before its base class): the kernel it multiplies with
    (`kernel_for` when it is built), kept in its state_dict ("gemm"). With
    `matmul_kernel: auto` a checkpoint's kernel is taken back, so that a resume rounds as
    the run did (a fused checkpoint without one multiplied with the BLAS); one this torch
    cannot run leaves `kernel_warning` set."""

    products: Products
    device: torch.device
    kernel_warning: str | None = None

    def _choose_products(self, requested: str, widths: tuple[int, ...]) -> None:
        self._requested = requested
        self.products = Products(kernel_for(requested, self.device, widths))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "gemm": self.products.kind}  # type: ignore[misc]

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        continues = super().load_state_dict(state)  # type: ignore[misc]
        self.kernel_warning = None
        if self._requested == "auto" and self.device.type == "cpu":
            saved = state.get("gemm", "blas")
            if saved in available():
                self.products = Products(saved)
            else:
                self.kernel_warning = (
                    f"the checkpoint's update multiplied with {saved}, which this torch "
                    f"lacks: the run goes on with {self.products.kind}, correctly but not "
                    "bit-identically")
        return continues

    def restore_warnings(self) -> list[str]:
        return [*super().restore_warnings(),  # type: ignore[misc]
                *([self.kernel_warning] if self.kernel_warning else [])]
