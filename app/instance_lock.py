"""The instance lock: an exclusive `flock` beside the sockets, so that racing starts elect
exactly one primary and a retiring primary never withdraws under a start that found it;
and the switch that turns instance sharing off.

Standard library only (trio is imported by `hold` alone): the quick proxy path
(app/quick.py) takes it before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path


#: The environment variable that turns instance sharing off (any value but "" and "0").
NO_SHARING_VAR = "ASSERN_NO_INSTANCE_SHARING"


def sharing_enabled(environ: Mapping[str, str]) -> bool:
    """Whether `ASSERN_NO_INSTANCE_SHARING` leaves sharing on."""
    return environ.get(NO_SHARING_VAR, "").strip() in ("", "0")


class InstanceError(Exception):
    """Instance sharing cannot work here; the text says why and what to do."""


class InstanceLock:
    """An exclusive `flock` on a file beside the sockets, held while electing a primary.

    The kernel drops it when its holder dies, so a killed start never blocks the next.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            raise RuntimeError("the instance lock is already held")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        self._fd = fd
        return True

    def acquire(self, timeout: float) -> None:
        """Block (polling) until the lock is ours.

        Raises:
            InstanceError: another process held it for `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise InstanceError(f"another assern held {self.path} for more than {timeout:g} s")
            time.sleep(0.01)

    @contextlib.asynccontextmanager
    async def hold(self, poll: float = 0.01) -> AsyncIterator[None]:
        """Hold the lock for a block of trio code (polls without blocking the thread)."""
        import trio

        while not self.try_acquire():  # noqa: ASYNC110 - an flock has no event to wait on
            await trio.sleep(poll)
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None
