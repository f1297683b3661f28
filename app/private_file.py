"""Small JSON files of this user's alone: written atomically (0600, in a 0700 folder the
user owns), read only when they still are (not through a link, not another user's).

Proxy hints (app/hint.py) and a session's first answers (app/first_answers.py) are kept
this way. Standard library only: the quick path and the resuming bridge use it.
"""

from __future__ import annotations

import json
import os
import stat


def private_dir(path: str) -> bool:
    """Whether `path` is a folder of this user's that nobody else may write."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def write_private_json(path: str, document: object) -> bool:
    """Write `document` as JSON at `path` atomically (0600, in a 0700 folder of this
    user's); whether it was written (a folder or file that cannot be is left alone)."""
    folder, name = os.path.split(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        pass
    if not private_dir(folder):
        return False
    temporary = os.path.join(folder, f".{name}.{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(json.dumps(document, sort_keys=True))  # the C encoder, in one piece
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return False
    return True


def read_private_json(path: str) -> object:
    """The JSON at `path` when it is this user's file in a private folder of this user's
    (not a link), else None."""
    if not private_dir(os.path.dirname(path)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as file:
            if os.fstat(file.fileno()).st_uid != os.getuid():
                return None
            return json.load(file)
    except (OSError, ValueError):
        return None
