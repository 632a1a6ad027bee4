"""A run's folders deleted (or deleted and made again) while the run writes to them.

A run that goes on writing into a folder someone removed would make it again, empty,
and lose what was in it without a word. The trainer checks every few steps, before it
writes, and stops with this message instead.
"""

from __future__ import annotations

from pathlib import Path


class FolderWatch:
    """Which folders a run started with, by device and inode."""

    def __init__(self, folders: tuple[Path, ...] = ()) -> None:
        self.known = {folder: folder_id(folder) for folder in folders}

    def deleted(self) -> list[Path]:
        """The folders that are gone, or were made again, since the watch began."""
        return [folder for folder, known in self.known.items() if folder_id(folder) != known]


def folder_id(folder: Path) -> tuple[int, int] | None:
    """Which folder `folder` is (device, inode); None when there is none."""
    try:
        info = folder.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def deleted_message(folders: list[Path]) -> str:
    named = " and ".join(f"'{folder}'" for folder in folders)
    many = len(folders) > 1
    return (f"the run's folder{'s' if many else ''} {named} {'were' if many else 'was'} "
            f"deleted while the run wrote to {'them' if many else 'it'}")
