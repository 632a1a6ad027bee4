"""A folder given where a checkpoint file is wanted (`rltrain eval --checkpoint RUN`):
one line naming the checkpoint files to give instead. A run's checkpoint folder lists
its own; a run's log folder the ones in the run's checkpoint folder (its config.yaml
says where); a folder of runs' checkpoint folders names those runs. An RLlib checkpoint
folder (a run watched by rltrain's RLlib callback) is said to be RLlib's, with how RLlib
continues it."""

from __future__ import annotations

from pathlib import Path

from rltrain.utils.errors import UserError
from rltrain.utils.io.safe_yaml import read_yaml_mapping

SHOWN = 6  # checkpoint files or runs a message names before "..."
RLLIB_MARK = "rllib_checkpoint.json"  # in every checkpoint folder RLlib's save_to_path writes


def folder_message(folder: Path) -> str:
    """What to give instead of `folder`, in one line."""
    if (folder / RLLIB_MARK).is_file():
        return _rllib_message(folder)
    found = checkpoints_in(folder)
    if found:
        return f"'{folder}' is a folder; give one of its checkpoints: {_listed(folder, found)}"
    if (folder / "config.yaml").is_file():  # a run's log folder
        return _log_folder_message(folder)
    runs = [sub for sub in _entries(folder) if sub.is_dir() and checkpoints_in(sub)]
    if runs:
        names = ", ".join(f"{run.name}/" for run in runs[:SHOWN])
        more = ", ..." if len(runs) > SHOWN else ""
        return (f"'{folder}' holds runs' checkpoint folders ({names}{more}); give a "
                f"checkpoint of one (e.g. {runs[0] / checkpoints_in(runs[0])[0].name})")
    return f"'{folder}' is a folder with no checkpoint (*.pt) in it"


def _rllib_message(folder: Path) -> str:
    """What to do with an RLlib checkpoint (an rltrain RLlib callback run's pause or best
    checkpoint), which rltrain's resume cannot continue: RLlib does, in Python."""
    run = folder.resolve().parent.name
    return (f"'{folder}' is an RLlib checkpoint, not an rltrain checkpoint: continue it in "
            f"Python with RLlib (Algorithm.from_checkpoint(path), then train(): its config's "
            f"callback continues run \"{run}\"); `rltrain status {run}` prints the exact lines")


def checkpoints_in(folder: Path) -> list[Path]:
    """The checkpoint files (*.pt) in `folder`, by name (best_model.pt first)."""
    return [path for path in _entries(folder) if path.suffix == ".pt" and path.is_file()]


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:  # unreadable: nothing found in it, said as such
        return []


def _listed(folder: Path, found: list[Path]) -> str:
    names = ", ".join(path.name for path in found[:SHOWN])
    more = ", ..." if len(found) > SHOWN else ""
    return f"{names}{more} (e.g. {folder / found[0].name})"


def _log_folder_message(folder: Path) -> str:
    where = _checkpoint_folder_of(folder)
    found = checkpoints_in(where) if where is not None else []
    if found:
        return (f"'{folder}' is a run's log folder; its checkpoints are in '{where}': "
                f"{_listed(where, found)}")
    return (f"'{folder}' is a run's log folder; its checkpoints are in the run's "
            f"checkpoint folder (checkpoints/{folder.name}/ by default)")


def _checkpoint_folder_of(log_folder: Path) -> Path | None:
    """`<checkpoint_dir>/<run>` as the run's config.yaml gives it (a relative
    checkpoint_dir is taken from the current folder, as the run took it); None when the
    file does not say."""
    try:
        checkpoint_dir = read_yaml_mapping(log_folder / "config.yaml").get("checkpoint_dir")
    except UserError:
        return None
    if not isinstance(checkpoint_dir, str) or not checkpoint_dir:
        return None
    return Path(checkpoint_dir).expanduser() / log_folder.name
