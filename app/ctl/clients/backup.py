"""Backups of client files, taken before `clients wire` changes them.

They live under `$ASSERN_HOME/backups/clients/CLIENT/`, named after the file's path
(`/` written `%`), so a project's folder gets no new file. An existing backup is never
overwritten: the next one is numbered (`NAME.1`, `NAME.2`...). A backup that would hold
the same bytes as the newest one is not taken again. `clients restore` puts the newest
back; it stays, so a second restore changes nothing.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from assern.app.ctl.clients.files import FileRefused

if TYPE_CHECKING:
    from pathlib import Path

    from assern.app.ctl.clients.files import Snapshot


def backup_folder(assern_home: Path, client: str) -> Path:
    return assern_home / "backups" / "clients" / client


def backup_name(path: Path) -> str:
    """The backup's file name for a config file: its absolute path with `%` for `/`."""
    return str(path.absolute()).replace("%", "%25").replace("/", "%")


def backups(folder: Path, path: Path) -> list[Path]:
    """The backups of `path`, oldest first."""
    name = backup_name(path)
    numbered = re.compile(re.escape(name) + r"(?:\.(\d+))?")
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        match = numbered.fullmatch(entry)
        if match is not None:
            found.append((int(match.group(1) or 0), folder / entry))
    return [path for _, path in sorted(found)]


def newest(folder: Path, path: Path) -> Path | None:
    found = backups(folder, path)
    return found[-1] if found else None


def take_backup(folder: Path, snap: Snapshot) -> tuple[Path, bool]:
    """Save what `snap` read, unless the newest backup already holds those bytes.

    Returns:
        (the backup holding the file's bytes, whether it was written now).

    Raises:
        FileRefused: the backup cannot be written (then the file is not changed either).
    """
    last = newest(folder, snap.path)
    if last is not None and last.read_bytes() == snap.data:
        return last, False
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise FileRefused(f"{folder}: cannot hold the backup: {exc.strerror or exc}") from None
    name = backup_name(snap.path)
    number = len(backups(folder, snap.path))
    while True:
        candidate = folder / (name if number == 0 else f"{name}.{number}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, snap.mode & 0o700 or 0o600)
        except FileExistsError:
            number += 1
            continue
        except OSError as exc:
            raise FileRefused(f"{candidate}: cannot write the backup: {exc.strerror or exc}") from None
        with os.fdopen(fd, "wb") as file:
            file.write(snap.data)
            file.flush()
            os.fsync(file.fileno())
        return candidate, True
