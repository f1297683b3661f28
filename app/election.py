"""Electing the primary: which `assern serve` runs the tree, and which ones proxy to it.

Under the project's instance lock (so racing starts see one another), a start looks at
every slot where an instance of its configuration may listen. An instance that answers
`hello` with the same configuration fingerprint gets this start as a proxy. A socket
nobody listens at is stale: its files are removed. Otherwise this start binds the home
slot (or, when another configuration holds that, its own slot) and becomes the primary.
The lock is released once the sockets listen, so the next start finds them.
"""

from __future__ import annotations

import contextlib
import enum
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from assern.actors.listener.unix_socket import UnixListener
from assern.app.control_client import ControlError, ControlUnavailable, connect_unix, request
from assern.app.instance import (
    InstanceError,
    InstanceLock,
    Liveness,
    Slot,
    candidate_slots,
    fingerprint,
    home_slot,
    lock_path,
    own_slot,
    prepare_socket_directory,
    probe,
    socket_directory,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assern.actors.config.spec import ResolvedConfig

log = structlog.get_logger()

#: How long a primary may take to answer `hello`. A primary that just won answers once
#: its tree runs (an import and a start: a second or two on a loaded machine); one that
#: never answers is treated as hung, and its slot is left alone.
HELLO_TIMEOUT = 10.0
#: Longer than a few hello waits: the lock holder may be waiting on one.
LOCK_TIMEOUT = 40.0


@attrs.frozen(kw_only=True, eq=False)
class Primary:
    """This start won: it listens on the slot's sockets and must run the tree.

    Attributes:
        slot: Where it listens.
        mcp: The MCP socket's listener.
        control: The control socket's listener.
        lock: The instance lock's path (taken again when the primary retires).
        fingerprint: The configuration's fingerprint.
    """

    slot: Slot
    mcp: UnixListener
    control: UnixListener
    lock: Path
    fingerprint: str

    def withdraw(self) -> None:
        """Remove both socket files and stop listening."""
        self.mcp.withdraw()
        self.control.withdraw()

    def forget(self) -> None:
        """Close this process's descriptors only (the launcher, after `fork`)."""
        self.mcp.forget()
        self.control.forget()


@attrs.frozen(kw_only=True, eq=False)
class Proxy:
    """An instance of the same configuration runs: bridge stdio to its MCP socket.

    Attributes:
        slot: Where it listens.
        sock: A connected socket to its MCP socket.
        pid: The primary's pid, as it said.
        lock: The instance lock's path.
        fingerprint: The configuration's fingerprint (the primary's too).
    """

    slot: Slot
    sock: socket.socket
    pid: int | None
    lock: Path
    fingerprint: str


class Seen(enum.Enum):
    FREE = "free"  #: nobody there (stale files were removed)
    OCCUPIED = "occupied"  #: somebody listens there, not (or not provably) our configuration
    ANSWERED = "answered"  #: an instance said hello


def look(slot: Slot, timeout: float) -> tuple[Seen, dict[str, Any] | None]:
    """Who is at `slot`: free (stale files removed), occupied, or an instance that said hello."""
    try:
        hello = request(slot.control, "hello", timeout=timeout, connect_timeout=timeout)
    except ControlUnavailable:
        pass
    except ControlError:
        return Seen.OCCUPIED, None  # an instance that speaks another protocol
    else:
        return (Seen.ANSWERED, hello) if isinstance(hello, dict) else (Seen.OCCUPIED, None)
    states = {probe(slot.control, timeout), probe(slot.mcp, timeout)}
    if Liveness.LIVE in states:
        return Seen.OCCUPIED, None  # hung, or somebody else's: never remove what may be in use
    if Liveness.STALE in states:
        for path in (slot.mcp, slot.control):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        log.info("stale_socket_removed", slot=slot.name, path=str(slot.mcp))
    return Seen.FREE, None


def bind_slot(slot: Slot) -> tuple[UnixListener, UnixListener]:
    """Listen on the slot's MCP and control sockets (leftover files replaced)."""
    for path in (slot.mcp, slot.control):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a leftover nobody listens at (see look)
    mcp = UnixListener.bind(slot.mcp)
    try:
        control = UnixListener.bind(slot.control)
    except BaseException:
        mcp.withdraw()
        raise
    return mcp, control


def elect(
    config: ResolvedConfig,
    *,
    assern_home: Path,
    environ: Mapping[str, str],
    hello_timeout: float = HELLO_TIMEOUT,
    lock_timeout: float = LOCK_TIMEOUT,
) -> Primary | Proxy:
    """Become the primary for `config`, or find the primary to proxy to.

    Raises:
        InstanceError: the socket folder is unsafe or unusable, the lock is held too
            long, or the sockets cannot be bound. The caller runs isolated (or, as a
            daemon, stops) and says why.
    """
    directory = socket_directory(assern_home, environ)
    prepare_socket_directory(directory)
    if directory.fallback:
        log.info("instance_socket_fallback", directory=str(directory.path), reason="path too long")
    digest = fingerprint(config)
    lock = InstanceLock(lock_path(directory.path, config.project))
    lock.acquire(lock_timeout)
    try:
        occupied: set[str] = set()
        existing = os.listdir(directory.path)
        for slot in candidate_slots(directory.path, config.project, digest, existing):
            seen, hello = look(slot, hello_timeout)
            if seen is Seen.ANSWERED and hello is not None and hello.get("fingerprint") == digest:
                try:
                    sock = connect_unix(slot.mcp, hello_timeout)
                except ControlUnavailable:
                    occupied.add(slot.name)
                    continue
                pid = hello.get("pid") if isinstance(hello.get("pid"), int) else None
                log.info("instance_proxy", slot=slot.name, primary_pid=pid, socket=str(slot.mcp))
                return Proxy(slot=slot, sock=sock, pid=pid, lock=lock.path, fingerprint=digest)
            if seen is not Seen.FREE:
                occupied.add(slot.name)
        home = home_slot(directory.path, config.project)
        slot = home if home.name not in occupied else own_slot(directory.path, config.project, digest)
        if slot.name in occupied:
            raise InstanceError(f"{slot.mcp} is held by an instance that does not answer; stop or remove it")
        try:
            mcp, control = bind_slot(slot)
        except OSError as exc:
            raise InstanceError(f"cannot listen on {slot.mcp}: {exc.strerror or exc}") from None
        log.info("instance_primary", slot=slot.name, socket=str(slot.mcp), control=str(slot.control))
        return Primary(slot=slot, mcp=mcp, control=control, lock=lock.path, fingerprint=digest)
    finally:
        lock.release()
