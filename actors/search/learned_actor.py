"""The learning actor: merges the calls counted in memory into the use file, in the
background, and publishes the merged counts for searches (learned.py).

Every `INTERVAL` seconds, and once more when assern stops, it takes what the
connections recorded (`UseRecorder`), adds it to the file under the file's lock in a
worker thread (the trio thread never touches the disk), and publishes the merged counts.
With nothing recorded it reads the file again only when it changed (another instance
sharing `$ASSERN_HOME` wrote it); until a call is counted it makes no file, and a file
deleted is forgotten. Counts that could not be written are kept in memory
and tried again. With `[settings.search] learn = "off"` it drops what was recorded and
publishes no counts: searches are ranked as if nothing had been learned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from assern.actors.search import learned as lrn

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from assern.supervisor.cell import Cell

log = structlog.get_logger()

#: seconds between two merges into the file
INTERVAL = 5.0


class LearnedActor:
    """Args:
    published: Where the merged counts go (searches read them).
    recorder: What the connections recorded since the last merge.
    enabled: Whether the settings learn from use now (`[settings.search] learn`).
    path: The use file (None: counted in memory only, for this run).
    interval: Seconds between two merges.
    """

    def __init__(
        self,
        published: Cell[lrn.Learned],
        recorder: lrn.UseRecorder,
        enabled: Callable[[], bool],
        path: Path | None,
        interval: float = INTERVAL,
    ) -> None:
        self.published = published
        self.recorder = recorder
        self._enabled = enabled
        self.path = path
        self.interval = interval
        #: counts taken but not written yet (a failed write is tried again)
        self._unsaved: dict[lrn.Key, int] = {}
        #: the file's (mtime, size) when last read or written
        self._seen: tuple[int, int] | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="learned"):
            task_status.started()
            try:
                while True:
                    await self.merge()
                    await trio.sleep(self.interval)
            finally:
                with trio.CancelScope(shield=True):  # the last calls are kept at shutdown
                    await self.merge()

    async def merge(self) -> None:
        """Add what was recorded to the file and publish the merged counts."""
        if not self._enabled():
            self.recorder.taken()
            self._unsaved.clear()
            if self.published.value:
                self.published.set(lrn.NOTHING)
            self._seen = None  # read again when turned on
            return
        added = lrn.merged(self._unsaved, self.recorder.taken())
        if self.path is None:
            if added:
                self._unsaved = {}
                self.published.set(lrn.Learned(lrn.merged(self.published.value.calls, added)))
            return
        path = self.path
        if not added:
            now = _stat(path)
            if now is None:  # no file (yet, or deleted to forget): nothing learned, nothing made
                self._seen = None
                if self.published.value:
                    self.published.set(lrn.NOTHING)
                return
            if now == self._seen:
                return
        try:
            if added:
                counts = await trio.to_thread.run_sync(lrn.save, path, added)
            else:
                counts = await trio.to_thread.run_sync(lrn.load, path)
        except lrn.BadUseFile as exc:
            log.warning("search_use_file_set_aside", path=str(path), error=str(exc))
            self._unsaved = added
            self._seen = None
            return
        except OSError as exc:
            log.warning("search_use_not_saved", path=str(path), error=str(exc), calls=sum(added.values()))
            self._unsaved = added
            return
        self._unsaved = {}
        self._seen = _stat(path)
        if counts != self.published.value:
            self.published.set(counts)
        if added:
            log.debug("search_use_saved", calls=sum(added.values()), tools=len(counts.calls))


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size
