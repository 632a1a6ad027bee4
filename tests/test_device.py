"""Process-wide CPU settings (utils/device.py): freed memory is kept for reuse."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

# Fixes glibc's mmap threshold at its starting value (128 KiB), so that every
# activation-sized tensor (256 KiB) gets fresh pages from the kernel, then counts the
# page faults of 50 rounds of eight such tensors allocated, written and freed: each
# round faults its pages in anew unless keep_freed_memory() lets the heap reuse them.
PROGRAM = """
import ctypes, resource, sys, torch
from rltrain.utils.device import M_MMAP_THRESHOLD, keep_freed_memory
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
