"""The daemon's runtime file, `daemon.json` beside its sockets, and telling from it whether
a live daemon runs.

The daemon writes it (0600, atomically) once its sockets are claimed: its pid, start
time, build id, socket protocol and a random cookie. Its control socket's `hello`
answers the same cookie, so a reader trusts the file only when the daemon answering at
the socket beside it gives the file's pid and cookie: a stale file, garbage, or a pid
that now belongs to another process never passes for the daemon (`verify`).

At exit the daemon removes the file only while it is still its own (its cookie), and
before it withdraws its sockets: a daemon that claims the sockets after it writes a
file of its own, which the one leaving never removes.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.daemon.hello import DAEMON_SLOT, PROTOCOL
from assern.app.instance import Slot

#: The runtime file's name, in the socket folder.
RUNTIME_FILE = f"{DAEMON_SLOT}.json"
#: The longest runtime file read (a valid one is about 200 bytes).
MAX_SIZE = 64 * 1024
#: How long a reader waits for the daemon's `hello`.
HELLO_TIMEOUT = 5.0


class RuntimeFileError(ValueError):
    """A runtime file that cannot be read or is not a daemon's: the text says why."""


@attrs.frozen(kw_only=True)
class DaemonRecord:
    """What the runtime file says of the daemon that wrote it."""

    pid: int
    started_at: float
    build: str
    protocol: int
    cookie: str = attrs.field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def new_record(build: str, *, pid: int | None = None, started_at: float | None = None) -> DaemonRecord:
    """This process's record, with a fresh cookie."""
    return DaemonRecord(
        pid=os.getpid() if pid is None else pid,
        started_at=time.time() if started_at is None else started_at,
        build=build,
        protocol=PROTOCOL,
        cookie=secrets.token_hex(16),
    )


def runtime_path(folder: Path) -> Path:
    return folder / RUNTIME_FILE


def write_record(folder: Path, record: DaemonRecord) -> Path:
    """Write `record` as the runtime file in `folder`: 0600, atomically (a reader sees the
    previous file or this one, whole).

    Raises:
        OSError: it cannot be written (the previous file, if any, is left as it was).
    """
    path = runtime_path(folder)
    temporary = folder / f".{RUNTIME_FILE}.{os.getpid()}.tmp"
    data = json.dumps(record.to_json(), indent=2).encode() + b"\n"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise
    return path


def parse_record(data: bytes) -> DaemonRecord:
    """The record in a runtime file's bytes.

    Raises:
        RuntimeFileError: what is wrong with them.
    """
    try:
        doc = json.loads(data)
    except ValueError:
        raise RuntimeFileError("it is not JSON") from None
    if not isinstance(doc, dict):
        raise RuntimeFileError("it is not a JSON object")
    expected: Mapping[str, tuple[tuple[type, ...], str]] = {
        "pid": ((int,), "an integer"),
        "started_at": ((int, float), "a number"),
        "build": ((str,), "a string"),
        "protocol": ((int,), "an integer"),
        "cookie": ((str,), "a string"),
    }
    for key, (types, kind) in expected.items():
        value = doc.get(key)
        if isinstance(value, bool) or not isinstance(value, types):
            raise RuntimeFileError(f"{key} must be {kind}, found {json.dumps(value)[:40]}")
    if doc["pid"] <= 0:
        raise RuntimeFileError(f"pid must be positive, found {doc['pid']}")
    if not doc["cookie"]:
        raise RuntimeFileError("cookie is empty")
    return DaemonRecord(
        pid=doc["pid"],
        started_at=float(doc["started_at"]),
        build=doc["build"],
        protocol=doc["protocol"],
        cookie=doc["cookie"],
    )


def read_record(path: Path) -> DaemonRecord:
    """The record in the runtime file at `path`, if it is this user's and private.

    Raises:
        FileNotFoundError: there is none.
        RuntimeFileError: it cannot be read, is not private, or is not a runtime file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise RuntimeFileError(f"it cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise RuntimeFileError(f"it belongs to uid {info.st_uid}, not to this user")
        if info.st_mode & 0o077:
            raise RuntimeFileError(f"others may read or write it (mode {info.st_mode & 0o777:o}, not 600)")
        data = os.read(fd, MAX_SIZE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SIZE:
        raise RuntimeFileError(f"it is longer than {MAX_SIZE} bytes")
    return parse_record(data)


def remove_own(folder: Path, record: DaemonRecord) -> bool:
    """Remove the runtime file in `folder` if it is still `record`'s (the same pid and
    cookie); whether it was removed."""
    path = runtime_path(folder)
    try:
        found = read_record(path)
    except (OSError, RuntimeFileError):
        return False
    if (found.pid, found.cookie) != (record.pid, record.cookie):
        return False
    try:
        path.unlink()
    except OSError:
        return False
    return True


@attrs.frozen
class Verified:
    """The daemon that answers at the socket wrote the runtime file: this is it."""

    path: Path
    record: DaemonRecord
    hello: Mapping[str, Any]


@attrs.frozen
class NotVerified:
    """No live daemon stands behind the runtime file (`found`: there is a file)."""

    path: Path
    reason: str
    found: bool = True


def describe(found: Verified | NotVerified) -> dict[str, Any]:
    """What status says of the runtime file (`--json`)."""
    if isinstance(found, Verified):
        record = found.record
        return {"path": str(found.path), "verified": True, "pid": record.pid, "build": record.build}
    return {"path": str(found.path), "verified": False, "found": found.found, "reason": found.reason}


def ask_hello(slot: Slot) -> Mapping[str, Any] | None:
    """The control `hello` of whatever answers at `slot`, or None."""
    try:
        answer = request(slot.control, "hello", timeout=HELLO_TIMEOUT, connect_timeout=HELLO_TIMEOUT)
    except (ControlUnavailable, ControlError):
        return None
    return answer if isinstance(answer, dict) else None


def _alive(pid: int) -> str | None:
    """Why `pid` cannot be this user's daemon, or None when such a process runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"pid {pid} no longer runs"
    except PermissionError:
        return f"pid {pid} is another user's process now"
    return None


def verify(
    folder: Path, hello: Callable[[Slot], Mapping[str, Any] | None] = ask_hello
) -> Verified | NotVerified:
    """The daemon of the runtime file in `folder`, checked against the daemon answering
    at the sockets beside it; or why the file does not stand for a live daemon."""
    path = runtime_path(folder)
    try:
        record = read_record(path)
    except FileNotFoundError:
        return NotVerified(path, "there is no runtime file (no daemon runs, or it never wrote one)", False)
    except RuntimeFileError as exc:
        return NotVerified(path, f"{path} is not a daemon's runtime file: {exc}")
    dead = _alive(record.pid)
    if dead is not None:
        return NotVerified(path, f"{path} is stale: {dead}")
    slot = Slot(folder, DAEMON_SLOT)
    answer = hello(slot)
    if answer is None:
        return NotVerified(
            path,
            f"{path} is stale: pid {record.pid} runs, but no daemon answers at {slot.control} "
            "(that pid is another process now, or the daemon hangs)",
        )
    if answer.get("cookie") != record.cookie or answer.get("pid") != record.pid:
        return NotVerified(
            path,
            f"{path} is stale: the daemon answering at {slot.control} (pid {answer.get('pid')}) "
            f"did not write it (pid {record.pid})",
        )
    return Verified(path, record, answer)
