"""The memory limit of the cgroup this process runs in, and what its processes use.

A container, a SLURM job or a systemd unit caps memory below the machine's RAM: the
kernel's OOM killer ends the process at the cgroup's limit, whatever the host has free.
Read from cgroup v2 (`memory.max`, `memory.current`, the limit being the lowest of the
process's cgroup and its ancestors) or v1 (`memory.limit_in_bytes`,
`memory.usage_in_bytes`). Usage is counted as the kernel's OOM decision sees it, the
"working set": the usage without the inactive file cache it can drop first
(`inactive_file` in `memory.stat`), as Docker and the kubelet count it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
NO_LIMIT = 2**60  # v1 writes "no limit" as a page-rounded 2**63 - 1


@dataclass(frozen=True)
class CgroupMemory:
    limit: int  # bytes
    used: int  # bytes: the working set of every process in the cgroup


def cgroup_memory() -> CgroupMemory | None:
    """The memory limit of this process's cgroup and what it uses; None where there is no
    cgroup, no limit, or it cannot be read (not Linux)."""
    root = CGROUP_ROOT
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    paths = dict(line.split(":", 2)[1:] for line in lines if line.count(":") >= 2)
    if "memory" in paths:  # v1: a hierarchy of its own for the memory controller
        return _v1(root / "memory", paths["memory"])
    if "" in paths:
        return _v2(root, paths[""])
    return None


def _v2(root: Path, path: str) -> CgroupMemory | None:
    folder = _folder(root, path)
    limits = []
    for level in (folder, *folder.parents):
        limit = _number(level / "memory.max")
        if limit is not None:
            limits.append(limit)
        if level == root:
            break
    current = _number(folder / "memory.current")
    if not limits or current is None or min(limits) >= NO_LIMIT:
        return None
    return CgroupMemory(min(limits), current - _stat(folder, "inactive_file"))


def _v1(root: Path, path: str) -> CgroupMemory | None:
    folder = _folder(root, path)
    limit, usage = (_number(folder / f"memory.{name}_in_bytes") for name in ("limit", "usage"))
    if limit is None or usage is None or limit >= NO_LIMIT:
        return None
    return CgroupMemory(limit, usage - _stat(folder, "total_inactive_file"))


def _folder(root: Path, path: str) -> Path:
    """The cgroup's folder; in a cgroup namespace (a container) the process's own cgroup
    is the mounted root, while /proc names it by its path on the host."""
    folder = root / path.lstrip("/")
    return folder if folder.is_dir() else root


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return NO_LIMIT
    return int(text) if text.isdigit() else None


def _stat(folder: Path, key: str) -> int:
    try:
        lines = (folder / "memory.stat").read_text().splitlines()
    except OSError:
        return 0
    values = {name: value for name, _, value in (line.partition(" ") for line in lines)}
    return int(values[key]) if values.get(key, "").isdigit() else 0
