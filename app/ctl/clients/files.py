"""Replacing a file whole and safely: read once, write a temporary file, rename it.

`snapshot` reads a file and remembers its bytes; `replace` writes the new bytes to a
temporary file beside it (with the original's permissions), checks that the file still
holds the bytes that were read, and renames the temporary file over it, so a reader
sees the old file or the new one, never half of one. A symlinked config is written
through: the link's target is replaced, the link stays. A file without write permission
is refused, and so is one that changed since it was read (the client wrote it
meanwhile): nothing is written then.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

import attrs


class FileRefused(Exception):
    """The file cannot be replaced; it is left as it was. The message says why."""


@attrs.frozen
class Snapshot:
    """A file as read: where it is, what it held, its permissions and owner.

    Attributes:
        path: The path as given (a symlink stays one).
        target: The file actually read and replaced (the link's target).
        data: Its bytes.
        mode: Its permission bits.
        uid: Its owner.
        gid: Its group.
    """

    path: Path
    target: Path
    data: bytes = attrs.field(repr=False)
    mode: int
    uid: int
    gid: int


def snapshot(path: Path) -> Snapshot:
    """Read `path` (through a symlink) for a later `replace`.

    Raises:
        FileRefused: it does not exist or cannot be read.
    """
    target = Path(os.path.realpath(path))
    try:
        with open(target, "rb") as file:
            info = os.fstat(file.fileno())
            data = file.read()
    except FileNotFoundError:
        raise FileRefused(f"{path}: the file does not exist") from None
    except OSError as exc:
        raise FileRefused(f"{path}: cannot read it: {exc.strerror or exc}") from None
    return Snapshot(path, target, data, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def _current(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except OSError:
        return None


def check_writable(snap: Snapshot) -> None:
    """Refuse a file without the owner's write permission (root could write it anyway).

    Raises:
        FileRefused: it is read-only.
    """
    if not snap.mode & stat.S_IWUSR:
        raise FileRefused(f"{snap.path}: the file is read-only; make it writable first (chmod u+w)")


def replace(snap: Snapshot, data: bytes) -> None:
    """Put `data` in place of the file `snap` read, atomically.

    Raises:
        FileRefused: the file is read-only, changed since `snap` was taken, or the
            folder refuses the temporary file; the file is unchanged.
    """
    check_writable(snap)
    folder = snap.target.parent
    temporary = folder / f".{snap.target.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise FileRefused(f"{snap.path}: cannot write beside it: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
            os.fchmod(file.fileno(), snap.mode)
            if (snap.uid, snap.gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.fchown(file.fileno(), snap.uid, snap.gid)
        if _current(snap.target) != snap.data:
            raise FileRefused(
                f"{snap.path}: the file changed since it was read (is the client running and "
                "writing it?); nothing was written: run the command again"
            )
        os.replace(temporary, snap.target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename reaches the disk with the folder
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
