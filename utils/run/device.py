"""Choosing the torch device from the config's `device: auto | cpu | cuda`, and the
process-wide settings (threads, float32 precision, denormals, memory) training runs with."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any

import psutil
import torch

from rltrain.utils.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """auto -> CUDA when available, else CPU; an explicit cuda without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("config key 'device' is 'cuda' but CUDA is not available on this "
                          "machine (torch.cuda.is_available() is False); use auto or cpu")
    return torch.device(name)


# The widest hidden layer a CPU run trains with one torch thread when its config does not
# say (torch_threads: null). The matrix products of such an update are too small to split
# well, and on a machine busy with other work torch's one thread per core wait for each
# other: 2-20x slower (benchmarks/default_threads.py, results/default_threads.txt).
ONE_THREAD_WIDTH = 512


def default_threads(hidden_sizes: list[tuple[int, ...]], device: torch.device) -> int | None:
    """The torch threads of a run whose config leaves them to rltrain: one for a CPU run
    of networks no wider than ONE_THREAD_WIDTH, else torch's choice (None)."""
    widest = max((width for sizes in hidden_sizes for width in sizes), default=0)
    return 1 if device.type == "cpu" and widest <= ONE_THREAD_WIDTH else None


def tune_process(threads: int | None = None) -> None:
    """The process-wide CPU settings training runs with (the Trainer calls it first);
    `threads`: torch's CPU threads (None: leave torch's choice, one per core)."""
    if threads is not None:
        limit = 4 * (os.cpu_count() or 1)
        if threads > limit:  # torch crashed (a segmentation fault) with 100000
            raise ConfigError(f"config key 'torch_threads' is {threads}, beyond 4 per core of "
                              f"this machine's {os.cpu_count()}; use at most {limit}")
        torch.set_num_threads(threads)
    # Full float32 matrix products, whatever the process was set to before: TF32 (or
    # bf16) products on Ampere and later GPUs would change every result, and silently.
    torch.set_float32_matmul_precision("highest")
    flush_denormals()
    keep_freed_memory()


def check_network_memory(obs_dim: int, action_dim: int, actor_hidden: tuple[int, ...],
                         critic_hidden: tuple[int, ...], device: torch.device,
                         targets: tuple[str, ...] = ("actor", "critic")) -> None:
    """Refuse networks whose parameters cannot fit the device before allocating them: each
    parameter is held four times (online, gradient, Adam's two moments) in float32, and
    once more for a network with a target copy (`targets`: the algorithm's,
    agents/registry.py), the critic twice (its twin Q-networks)."""
    def count(inputs: int, hidden: tuple[int, ...], outputs: int) -> int:
        widths = [inputs, *hidden, outputs]
        return sum((a + 1) * b for a, b in zip(widths, widths[1:], strict=False))

    def copies(net: str) -> int:
        return 5 if net in targets else 4

    needed = 4 * (copies("actor") * count(obs_dim, actor_hidden, action_dim)
                  + copies("critic") * 2 * count(obs_dim + action_dim, critic_hidden, 1))
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
    else:
        total = psutil.virtual_memory().total
    if needed > total:
        sizes = list(actor_hidden) if actor_hidden == critic_hidden else \
            f"{list(actor_hidden)} (actor), {list(critic_hidden)} (critic)"
        raise ConfigError(f"config key 'hidden_sizes' {sizes} needs "
                          f"{needed / 2**30:.3g} GiB for the networks (weights, targets, "
                          f"gradients, Adam state); this {device.type} has {total / 2**30:.3g} "
                          "GiB: use smaller layers")


def flush_denormals() -> None:
    """Denormal floats (|x| < 1.2e-38) take a slow path on x86 CPUs; trained weights,
    gradients and Adam moments produce them as training goes on, which slows the updates.
    Flushing them to zero changes no result that matters. Process-wide;
    call it before the first parallel op so that worker threads inherit it."""
    torch.set_flush_denormal(True)


# glibc's mallopt() parameters (malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory(mmap_threshold: int = 16 << 20, trim_threshold: int = 64 << 20) -> bool:
    """Let glibc's malloc keep freed memory for reuse instead of handing it back to the
    kernel. An update allocates and frees some forty activation-sized tensors (256 KiB for
    256-wide layers and batch 256); with glibc's defaults the heap top was trimmed again
    and again, and every reuse faulted its pages back in: hundreds of page faults
    per update, which slowed the update measurably (benchmarks/throughput.py).
    Blocks above `mmap_threshold` (a large replay buffer) still get their own mapping, so
    untouched capacity stays free; at most `trim_threshold` bytes of freed heap are kept.
    Returns whether the settings took (False where the C library is not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return (mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1
            and mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1)


@functools.cache
def _numpy_blas() -> tuple[Any, ...]:
    """The BLAS libraries loaded in this process other than torch's own (numpy's
    OpenBLAS, or an MKL it links), as threadpoolctl controls them; read once."""
    from threadpoolctl import ThreadpoolController

    torch_dir = os.path.realpath(os.path.dirname(torch.__file__))
    return tuple(lib for lib in ThreadpoolController().lib_controllers
                 if lib.user_api == "blas"
                 and not os.path.realpath(lib.filepath).startswith(torch_dir))


class OneBlasThread:
    """numpy's BLAS on one thread inside the block, its thread count restored after.

    numpy's OpenBLAS splits a large enough product (a dot of a network's gradients, as
    TensorBoard's histogram takes) over a pool of threads, one per core, which then keep
    spinning for a while: in a watched DQN CartPole run that second thread took about 7%
    of a core, CPU time the run pays for work of a few milliseconds. The diagnostics run
    their calls inside this (utils/diagnosis/measure/timing.py); torch's own threads are
    torch.set_num_threads'. The setting is the process's: another thread's numpy call
    during the block also gets one thread."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, int]] = []

    def __enter__(self) -> None:
        self._saved = [(lib, n) for lib in _numpy_blas() if (n := lib.get_num_threads()) > 1]
        for lib, _ in self._saved:
            lib.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        for lib, threads in self._saved:
            lib.set_num_threads(threads)
        self._saved = []
