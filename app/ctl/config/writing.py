"""Writing a new config file: created, never overwritten, owner-only."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def write_new(path: Path, text: str) -> bool:
    """Create `path` with `text` (owner-only: configs hold tokens); False if it exists.

    Missing parent folders are created.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    return True
