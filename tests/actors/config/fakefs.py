"""A fake file system for the watcher: stamps that tests change by hand."""

from __future__ import annotations

from pathlib import Path

from assern.actors.config.watch import FileStamp


class FakeFiles:
    """Files by path; `stat` is what the watcher calls instead of `os.stat`."""

    def __init__(self) -> None:
        self.stamps: dict[Path, FileStamp] = {}
        self.stat_calls = 0
        self._clock = 0

    def write(self, path: Path, size: int | None = None) -> None:
        """Create or change a file: a newer mtime (and the given size)."""
        self._clock += 1
        old = self.stamps.get(path)
        self.stamps[path] = FileStamp(
            mtime_ns=self._clock,
            size=size if size is not None else (old.size if old else 0),
            inode=old.inode if old else len(self.stamps) + 1,
        )

    def replace(self, path: Path) -> None:
        """Save by rename: a new inode with the same mtime and size."""
        old = self.stamps[path]
        self.stamps[path] = FileStamp(mtime_ns=old.mtime_ns, size=old.size, inode=old.inode + 1000)

    def remove(self, path: Path) -> None:
        del self.stamps[path]

    def stat(self, path: Path) -> FileStamp | None:
        self.stat_calls += 1
        return self.stamps.get(path)
