"""Claiming the workstation daemon's sockets, race-safe, or taking them from systemd.

Under `daemon.lock` (an flock beside the sockets), a start looks at the daemon slot: a
daemon that answers `hello` is already running (the start says so and stops); a socket
nobody listens at is stale and removed; anything that listens but does not answer is
left alone (the start refuses). Otherwise the start binds `daemon.sock` and
`daemon.ctl` (0600, in the private socket folder) and becomes the daemon.

Started by socket activation (systemd's `assern.socket`: `LISTEN_PID` is this process,
`LISTEN_FDS` counts the descriptors from 3 on), the daemon takes the two listening
sockets it is given instead, told apart by their paths (`.sock`, `.ctl`), and never
removes their files: they are the service manager's.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from assern.actors.listener.unix_socket import UnixListener
from assern.app.daemon.hello import DAEMON_SLOT
from assern.app.daemon.supersede import Takeover, begin_takeover
from assern.app.election import HELLO_TIMEOUT, LOCK_TIMEOUT, Seen, bind_slot, look
from assern.app.instance import InstanceError, InstanceLock, Slot, prepare_socket_directory, socket_directory

if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping


class DaemonRunning(Exception):
    """A daemon already answers at the slot."""

    def __init__(self, pid: object, slot: Slot) -> None:
        super().__init__(f"a daemon already runs (pid {pid}, socket {slot.mcp})")
        self.pid = pid
        self.slot = slot


@attrs.frozen(kw_only=True, eq=False)
class Claimed:
    """The daemon's sockets, bound; or, superseding a running daemon, the takeover begun
    (`takeover`: the daemon warms, then takes the sockets: supersede.py)."""

    slot: Slot
    mcp: UnixListener | None = None
    control: UnixListener | None = None
    takeover: Takeover | None = None


@attrs.frozen(kw_only=True)
class Supersede:
    """A start that takes the sockets from a running daemon (supersede.py)."""

    build: str
    reason: str
    deadline: float
    #: replace only a daemon of this build (a client's upgrade: app/daemon/upgrade.py)
    only: str | None = None


#: The first descriptor a service manager passes (sd_listen_fds(3)).
FIRST_FD = 3


def activated(environ: MutableMapping[str, str]) -> Claimed | None:
    """The sockets systemd passed this process, or None when it passed none.

    The `LISTEN_*` variables are removed from `environ` (no child inherits them).

    Raises:
        InstanceError: sockets were passed but are not the daemon's two Unix sockets.
    """
    pid, count = environ.pop("LISTEN_PID", None), environ.pop("LISTEN_FDS", None)
    environ.pop("LISTEN_FDNAMES", None)
    if pid is None or count is None or pid != str(os.getpid()):
        return None
    found: dict[str, UnixListener] = {}
    for fd in range(FIRST_FD, FIRST_FD + int(count)):
        sock = socket.socket(fileno=fd)
        name = sock.getsockname()
        if sock.family != socket.AF_UNIX or not isinstance(name, str) or not name:
            raise InstanceError(
                f"descriptor {fd} passed by the service manager is not a Unix socket with a path"
            )
        path = Path(name)
        suffix = {".sock": "mcp", ".ctl": "control"}.get(path.suffix)
        if suffix is None or suffix in found:
            raise InstanceError(
                f"unexpected socket {path} passed by the service manager (expected .sock and .ctl)"
            )
        sock.setblocking(False)
        found[suffix] = UnixListener(sock, path, owned=False)
    if set(found) != {"mcp", "control"}:
        raise InstanceError("the service manager must pass two sockets: daemon.sock and daemon.ctl")
    mcp = found["mcp"]
    return Claimed(slot=Slot(mcp.path.parent, mcp.path.stem), mcp=mcp, control=found["control"])


def claim(assern_home: Path, environ: Mapping[str, str], supersede: Supersede | None = None) -> Claimed:
    """Bind the daemon's sockets; with `supersede`, begin taking them from the daemon that
    answers there (the takeover holds `daemon.lock` until it completes), or bind them as
    usual when none does.

    Raises:
        DaemonRunning: a daemon answers there already (and `supersede` is None).
        InstanceError: the folder is unsafe, the lock is held too long, something that
            does not answer holds the sockets, or they cannot be bound.
    """
    directory = socket_directory(assern_home, environ)
    prepare_socket_directory(directory)
    slot = Slot(directory.path, DAEMON_SLOT)
    lock = InstanceLock(directory.path / f"{DAEMON_SLOT}.lock")
    lock.acquire(LOCK_TIMEOUT)
    handed = False  # the lock goes with a takeover begun
    try:
        seen, hello = look(slot, HELLO_TIMEOUT)
        replaced = supersede is not None and supersede.only not in (None, (hello or {}).get("build"))
        if seen is Seen.ANSWERED and replaced:  # another start replaced that build first
            raise DaemonRunning((hello or {}).get("pid"), slot)
        if seen is Seen.ANSWERED and supersede is not None:
            takeover = begin_takeover(
                slot, build=supersede.build, reason=supersede.reason, deadline=supersede.deadline, lock=lock
            )
            handed = True
            return Claimed(slot=slot, takeover=takeover)
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
        if not handed:
            lock.release()
