"""What loading a checkpoint may cost, bounded before torch allocates anything.

`torch.load(..., weights_only=True)` runs no code, but it trusts the archive's sizes:
a zip entry compressed 200:1 unpacks to gigabytes, a storage record may claim more
elements than its bytes hold, and nested containers thousands deep overflow the checks
that walk them. Before torch reads the file, `check_bounds` reads the archive's own
directory and its pickle (`data.pkl`, with every class and call stood in for by a
placeholder, so nothing of the file runs) and refuses:

- an encrypted or compressed entry (torch.save writes neither) and entries whose sizes
  add up to more than the file's own size;
- a storage whose elements take more bytes than its record holds, a tensor that reaches
  past the end of its storage;
- containers nested deeper than MAX_DEPTH.

Each refusal is one CheckpointError naming the file.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

from rltrain.utils.errors import CheckpointError

MAX_DEPTH = 64  # rltrain's own checkpoints nest about 8 deep
# The bytes of one element of each storage type torch.save writes.
ELEMENT_BYTES = {
    "DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2,
    "LongStorage": 8, "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1,
    "ByteStorage": 1, "BoolStorage": 1, "ComplexDoubleStorage": 16,
    "ComplexFloatStorage": 8, "QUInt8Storage": 1, "QInt8Storage": 1, "QInt32Storage": 4,
    "QUInt4x2Storage": 1, "QUInt2x4Storage": 1, "UntypedStorage": 1,
}
TENSOR_BUILDERS = ("_rebuild_tensor", "_rebuild_tensor_v2")


class _Built:
    """What the pickle builds, stood in for: it takes any arguments, state and items, and
    keeps them (to be measured); nothing is called."""

    name = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Built:
        built = object.__new__(cls)
        built.parts = [args, kwargs]
        return built

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.parts = [args, kwargs]

    def __setstate__(self, state: Any) -> None:
        self.parts.append(state)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.parts.append((key, value))

    def append(self, value: Any) -> None:
        self.parts.append(value)

    def extend(self, values: Any) -> None:
        self.parts.append(list(values))


class _Storage:
    def __init__(self, key: str, numel: int) -> None:
        self.key, self.numel = key, numel


class _Probe(pickle.Unpickler):
    """Unpickles `data.pkl` with placeholders; records each storage's claim."""

    def __init__(self, data: bytes, records: dict[str, int], path: Path) -> None:
        import io

        super().__init__(io.BytesIO(data))
        self.records, self.path = records, path

    def find_class(self, module: str, name: str) -> type:
        return type(name, (_Built,), {"name": f"{module}.{name}"})

    def persistent_load(self, pid: Any) -> _Storage:
        try:
            _, storage_type, key, _, numel = pid
            element = ELEMENT_BYTES[storage_type.name.rpartition(".")[2]]
            numel, key = int(numel), str(key)
        except (TypeError, ValueError, KeyError, AttributeError):
            raise _refused(self.path, f"a storage it names is not one torch.save writes "
                                      f"({pid!r:.60})") from None
        held = self.records.get(key)
        if held is None or numel < 0 or numel * element > held:
            raise _refused(self.path, f"storage '{key}' claims {numel} elements of "
                                      f"{element} bytes, but its record holds {held} bytes")
        return _Storage(key, numel)


def _refused(path: Path, why: str) -> CheckpointError:
    return CheckpointError(f"checkpoint '{path}' is refused before loading: {why}")


def check_bounds(path: Path, archive: zipfile.ZipFile) -> None:
    """Refuse `archive` (the checkpoint at `path`) if loading it could take more memory
    than its own bytes, or nest deeper than MAX_DEPTH (module docstring)."""
    entries = archive.infolist()
    for entry in entries:
        if entry.flag_bits & 0x1:
            raise _refused(path, f"its entry '{entry.filename}' is encrypted")
        if entry.compress_type != zipfile.ZIP_STORED:
            raise _refused(path, f"its entry '{entry.filename}' is compressed (torch.save "
                                 "writes none; it may unpack to far more than the file)")
    claimed, size = sum(e.file_size for e in entries), path.stat().st_size
    if claimed > size:
        raise _refused(path, f"its entries claim {claimed} bytes, more than the file's "
                             f"{size}")
    pickles = [e for e in entries if e.filename.endswith("/data.pkl")
               or e.filename == "data.pkl"]
    if len(pickles) != 1:
        return  # not torch's archive layout: torch.load says what is wrong
    prefix = pickles[0].filename[:-len("data.pkl")]
    records = {e.filename[len(prefix) + 5:]: e.file_size for e in entries
               if e.filename.startswith(f"{prefix}data/")}
    try:
        loaded = _Probe(archive.read(pickles[0]), records, path).load()
    except CheckpointError:
        raise
    except Exception:  # noqa: BLE001 (a damaged pickle: torch.load names it)
        return
    _check_nesting(loaded, path)


def _check_nesting(loaded: Any, path: Path) -> None:
    """Walk what the pickle built (each object once), without recursion: refuse nesting
    deeper than MAX_DEPTH and tensors that reach past their storage."""
    seen: set[int] = set()
    todo = [(loaded, 1)]
    while todo:
        value, depth = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if depth > MAX_DEPTH:
            raise _refused(path, f"its data is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, _Built) and value.name.rpartition(".")[2] in TENSOR_BUILDERS:
            _check_extent(value.parts[0], path)
        if isinstance(value, dict):
            children = [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = list(value)
        elif isinstance(value, _Built):
            children = value.parts
        else:
            continue
        todo += [(child, depth + 1) for child in children]


def _check_extent(args: tuple, path: Path) -> None:
    """A tensor `(storage, offset, size, stride, ...)` must lie inside its storage."""
    try:
        storage, offset, size, stride = args[:4]
        if not isinstance(storage, _Storage):
            return
        size, stride, offset = [int(s) for s in size], [int(s) for s in stride], int(offset)
    except (TypeError, ValueError):
        raise _refused(path, "a tensor in it has no readable shape") from None
    if len(size) != len(stride) or offset < 0 or min(size, default=1) < 0:
        raise _refused(path, f"a tensor in it has shape {size} and strides {stride}")
    if 0 in size:
        return
    last = offset + sum((n - 1) * abs(s) for n, s in zip(size, stride, strict=True))
    if last >= storage.numel:
        raise _refused(path, f"a tensor of shape {size} reaches element {last} of storage "
                             f"'{storage.key}', which has {storage.numel}")
