"""Process-wide settings (utils/run/device.py): freed memory is kept for reuse, float32
products are full precision, and the config's torch thread count takes effect."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
import torch

from rltrain.scripts.training.trainer import Trainer

from conftest import DEVICE, tiny_config

# Fixes glibc's mmap threshold at its starting value (128 KiB), so that every
# activation-sized tensor (256 KiB) gets fresh pages from the kernel, then counts the
# page faults of 50 rounds of eight such tensors allocated, written and freed: each
# round faults its pages in anew unless keep_freed_memory() lets the heap reuse them.
PROGRAM = """
import ctypes, resource, sys, torch
from rltrain.utils.run.device import M_MMAP_THRESHOLD, keep_freed_memory
ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 128 << 10)
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def rounds(n):
    for _ in range(n):
        tensors = [torch.ones(256, 256) for _ in range(8)]
        del tensors
rounds(5)
before = faults()
rounds(50)
print(faults() - before)
"""


def page_faults(mode: str) -> int:
    result = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True,
                            text=True, check=True)
    return int(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_memory_is_reused_without_page_faults():
    fresh = page_faults("fresh")
    kept = page_faults("keep")
    pages = 256 * 1024 // resource.getpagesize()
    assert fresh >= 50 * 8 * pages * 0.9
    assert kept < 100


def test_torch_threads_from_the_config_take_effect(tmp_path):
    """Two runs at once on 2 cores ran 4x slower with torch's default threads (two each)
    than with one each: the config key must reach torch."""
    before = torch.get_num_threads()
    try:
        Trainer(tiny_config(tmp_path, torch_threads=1), DEVICE, interactive=False).close()
        assert torch.get_num_threads() == 1
        Trainer(tiny_config(tmp_path, torch_threads=3), DEVICE, interactive=False).close()
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("hidden, expected", [([256, 256], 1), ([400, 300], 1),
                                              ([1024, 1024], "torch's")])
def test_without_torch_threads_small_networks_train_with_one_thread(tmp_path, hidden,
                                                                     expected):
    """A busy 2-core machine trained the README's first run (256x256) at 1-3 env steps/s
    with torch's default threads and 7-14 with one (benchmarks/default_threads.py)."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # torch's own choice on a 2-core machine
        config = tiny_config(tmp_path, torch_threads=None, hidden_sizes=hidden)
        Trainer(config, torch.device("cpu"), interactive=False).close()
        assert torch.get_num_threads() == (2 if expected == "torch's" else expected)
    finally:
        torch.set_num_threads(before)


def test_training_uses_full_float32_products_whatever_was_set_before(tmp_path):
    """TF32 products (allowed by set_float32_matmul_precision("high") on Ampere and later
    GPUs) would change every result of a CUDA run without a word."""
    torch.set_float32_matmul_precision("high")
    try:
        Trainer(tiny_config(tmp_path), DEVICE, interactive=False).close()
        assert torch.get_float32_matmul_precision() == "highest"
        assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.set_float32_matmul_precision("highest")


def test_the_memory_check_counts_a_target_copy_only_for_the_networks_with_one(monkeypatch):
    """Each parameter takes 4 float32 copies (weights, gradient, Adam's moments) and one
    more where the algorithm keeps a target (agents/registry.py `Algorithm.targets`)."""
    from types import SimpleNamespace

    import torch

    from rltrain.utils.errors import ConfigError
    from rltrain.utils.run import device as device_module

    params = (3 + 1) * 10 + (10 + 1) * 1 + 2 * ((4 + 1) * 10 + (10 + 1) * 1)  # 173
    monkeypatch.setattr(device_module.psutil, "virtual_memory",
                        lambda: SimpleNamespace(total=4 * 4 * params))
    check = device_module.check_network_memory
    check(3, 1, (10,), (10,), torch.device("cpu"), targets=())  # exactly fits
    with pytest.raises(ConfigError, match="GiB for the networks"):
        check(3, 1, (10,), (10,), torch.device("cpu"), targets=("critic",))


def test_a_diagnostics_call_runs_numpy_blas_on_one_thread_and_restores_it():
    """numpy's BLAS pool (its threads would spin on a second core after a large dot) is
    set to one thread for a timed diagnostics call, nested calls included, and put back
    to what it was after it, even when the call raises."""
    import numpy  # noqa: F401  (its BLAS loaded)
    from threadpoolctl import ThreadpoolController

    from rltrain.utils.diagnosis.measure.timing import timed
    from rltrain.utils.run.device import _numpy_blas

    libs = _numpy_blas()
    assert libs, "numpy's BLAS library was not found"

    def threads() -> list[int]:
        return [lib.get_num_threads() for lib in libs]

    class Probe:
        timing, seconds = False, 0.0

        @timed
        def call(self, fail: bool = False) -> list[int]:
            if fail:
                raise RuntimeError("probe")
            return threads()

    class Outer:
        timing, seconds = False, 0.0

        @timed
        def call(self) -> tuple[list[int], list[int]]:
            return Probe().call(), threads()

    with ThreadpoolController().select(user_api="blas").limit(limits=2):
        before = threads()
        assert before == [2] * len(libs)
        assert Probe().call() == [1] * len(libs)
        assert Outer().call() == ([1] * len(libs), [1] * len(libs))
        assert threads() == before
        with pytest.raises(RuntimeError):
            Probe().call(fail=True)
        assert threads() == before
