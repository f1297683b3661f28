"""Whether a session's folder is inside the roots its client reports (see roots.py).

Pure, and standard library only (with attrs), so `assernctl status` renders roots
without loading the protocol models.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import attrs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from assern.actors.config.spec import ResolvedConfig


@attrs.frozen(kw_only=True)
class SessionFolder:
    """The folder a session's configuration was resolved for.

    Attributes:
        path: An absolute folder.
        kind: What it is: "project root" (the folder holding `.assern/`) or
            "working folder" (where the client started, when no `.assern/` is above it).
    """

    path: str
    kind: str = "working folder"


def config_folder(config: ResolvedConfig) -> SessionFolder | None:
    """The folder `config` was resolved for: its project root, else its working folder."""
    if config.local_root is not None:
        return SessionFolder(path=str(config.local_root), kind="project root")
    if config.cwd is not None:
        return SessionFolder(path=str(config.cwd), kind="working folder")
    return None


def root_folder(uri: str) -> PurePosixPath | None:
    """The local folder a root URI names (`file:///home/me/x`), None for any other URI."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    return PurePosixPath(path) if path.startswith("/") else None


def _inside(folder: PurePosixPath, root: PurePosixPath) -> bool:
    return folder == root or root in folder.parents


def disagreement(folder: SessionFolder, roots: Sequence[str]) -> str | None:
    """The warning for a session whose folder is outside every root, None when it is not.

    A client that reports no roots names no folder: there is nothing to disagree with.
    """
    if not roots:
        return None
    path = PurePosixPath(folder.path)
    if any((root := root_folder(uri)) is not None and _inside(path, root) for uri in roots):
        return None
    shown = ", ".join(str(root_folder(uri) or uri) for uri in roots)
    return (
        f"{folder.kind} {folder.path} is outside the client's roots {shown}: "
        f"this session is served the configuration of {folder.path}"
    )
