"""A polling file watcher: notices when a watched file is created, changed or removed.

Hot reload needs to know when a config or .env file changed. Polling `stat()` about
once a second is portable, needs no dependency and costs a few system calls; a file
counts as changed when its mtime, size or inode differ (an editor that saves by writing
a new file and renaming it over the old one changes the inode). A burst of writes (an
editor's save, a `git checkout`) is debounced into one event.

Time comes from trio's clock and the file system from an injectable `stat` function, so
tests drive the watcher on a virtual clock over fake files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import attrs
import trio

#: Default seconds between two looks at the files.
POLL_INTERVAL = 1.0
#: Default seconds the files must stay unchanged before a change is reported.
QUIET_PERIOD = 0.3
#: Default longest debounce: a file that never stops changing is reported after this.
MAX_DELAY = 5.0


@attrs.frozen
class FileStamp:
    """What identifies one version of a file: modification time, size and inode."""

    mtime_ns: int
    size: int
    inode: int


#: Stat one path: its stamp, or None when it does not exist (or cannot be looked at).
StatFn = Callable[[Path], "FileStamp | None"]

#: Stamps by path; None for a path that does not exist.
Stamps = Mapping[Path, "FileStamp | None"]


def stat_file(path: Path) -> FileStamp | None:
    """The stamp of `path` from the file system, or None when it is absent or unreadable.

    An unreadable file counts as absent: reloading then reports the real error, with
    the file's name, through the config loader.
    """
    try:
        result = os.stat(path)
    except OSError:
        return None
    return FileStamp(mtime_ns=result.st_mtime_ns, size=result.st_size, inode=result.st_ino)


def changed_paths(before: Stamps, after: Stamps) -> tuple[Path, ...]:
    """The paths of `after` whose stamp differs from the one in `before`.

    A path that `before` does not know is new to the watched set, not a changed file:
    it is not reported (the reload that added it has just read it).

    Args:
        before: The stamps last seen.
        after: The stamps now.

    Returns:
        The changed paths, in the order of `after`.
    """
    return tuple(path for path, stamp in after.items() if path in before and before[path] != stamp)


class FileWatcher:
    """Watches a set of paths (which may change between looks) and reports changes.

    Args:
        paths: Called at every look for the paths to watch: files that exist and files
            that would matter if they were created.
        stat: How to stat one path (`stat_file` unless a test fakes the file system).
        interval: Seconds between two looks.
        quiet: After a change, the files must stay the same for this long before the
            change is reported, so a burst of writes makes one event.
        max_delay: A change is reported at the latest this long after it was first
            seen, even if the files keep changing.
    """

    def __init__(
        self,
        paths: Callable[[], Iterable[Path]],
        *,
        stat: StatFn = stat_file,
        interval: float = POLL_INTERVAL,
        quiet: float = QUIET_PERIOD,
        max_delay: float = MAX_DELAY,
    ) -> None:
        self._paths = paths
        self._stat = stat
        self.interval = interval
        self.quiet = quiet
        self.max_delay = max_delay
        self._seen: dict[Path, FileStamp | None] | None = None

    def look(self) -> dict[Path, FileStamp | None]:
        """Stat every watched path now."""
        return {path: self._stat(path) for path in dict.fromkeys(self._paths())}

    def prime(self) -> None:
        """Take the current stamps as the baseline: only later changes are reported."""
        self._seen = self.look()

    async def next_change(self) -> tuple[Path, ...]:
        """Wait for the next (debounced) change of any watched file.

        The first call primes the baseline if `prime` was not called. Cancellation is
        safe at any point: the baseline then still holds the last reported state.

        Returns:
            The paths that changed since the last reported change, in watched order.
        """
        if self._seen is None:
            self.prime()
        while True:
            await trio.sleep(self.interval)
            seen = self._seen or {}
            now = self.look()
            if not changed_paths(seen, now):
                self._seen = now
                continue
            now = await self._settle(now)
            changed = changed_paths(seen, now)
            self._seen = now
            if changed:
                return changed

    async def _settle(self, now: dict[Path, FileStamp | None]) -> dict[Path, FileStamp | None]:
        """Look again every `quiet` seconds until nothing changed in between (or max_delay)."""
        deadline = trio.current_time() + self.max_delay
        while trio.current_time() < deadline:
            await trio.sleep(self.quiet)
            again = self.look()
            if again == now:
                break
            now = again
        return now
