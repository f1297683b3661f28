"""Claiming the workstation daemon's sockets, race-safe.

Under `daemon.lock` (an flock beside the sockets), a start looks at the daemon slot: a
daemon that answers `hello` is already running (the start says so and stops); a socket
nobody listens at is stale and removed; anything that listens but does not answer is
left alone (the start refuses). Otherwise the start binds `daemon.sock` and
`daemon.ctl` (0600, in the private socket folder) and becomes the daemon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from assern.actors.listener.unix_socket import UnixListener
from assern.app.daemon.hello import DAEMON_SLOT
from assern.app.election import HELLO_TIMEOUT, LOCK_TIMEOUT, Seen, bind_slot, look
from assern.app.instance import InstanceError, InstanceLock, Slot, prepare_socket_directory, socket_directory

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


class DaemonRunning(Exception):
    """A daemon already answers at the slot."""

    def __init__(self, pid: object, slot: Slot) -> None:
        super().__init__(f"a daemon already runs (pid {pid}, socket {slot.mcp})")
        self.pid = pid
        self.slot = slot


@attrs.frozen(kw_only=True, eq=False)
class Claimed:
    """The daemon's sockets, bound."""

    slot: Slot
    mcp: UnixListener
    control: UnixListener


def daemon_slot(assern_home: Path, environ: Mapping[str, str]) -> Slot:
    """Where the daemon of `assern_home` listens (the folder is not created).

    Raises:
        InstanceError: no socket folder short enough.
    """
    return Slot(socket_directory(assern_home, environ).path, DAEMON_SLOT)


def claim(assern_home: Path, environ: Mapping[str, str]) -> Claimed:
    """Bind the daemon's sockets.

    Raises:
        DaemonRunning: a daemon answers there already.
        InstanceError: the folder is unsafe, the lock is held too long, something that
            does not answer holds the sockets, or they cannot be bound.
    """
    directory = socket_directory(assern_home, environ)
    prepare_socket_directory(directory)
    slot = Slot(directory.path, DAEMON_SLOT)
    lock = InstanceLock(directory.path / f"{DAEMON_SLOT}.lock")
    lock.acquire(LOCK_TIMEOUT)
    try:
        seen, hello = look(slot, HELLO_TIMEOUT)
        if seen is Seen.ANSWERED:
            raise DaemonRunning((hello or {}).get("pid"), slot)
        if seen is Seen.OCCUPIED:
            raise InstanceError(f"{slot.mcp} is held by a process that does not answer; stop or remove it")
        try:
            mcp, control = bind_slot(slot)
        except OSError as exc:
            raise InstanceError(f"cannot listen on {slot.mcp}: {exc.strerror or exc}") from None
        return Claimed(slot=slot, mcp=mcp, control=control)
    finally:
        lock.release()
