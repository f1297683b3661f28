"""A builtin context server's index as people see it, read from its database.

A context server (assern.context, a process of its own that nothing imports) publishes
its state in a `state` table of its database, one JSON value per key
(assern/context/state.py says which). `read_index` reads it back, read-only, with the
counts of the index itself (files, chunks, database size): the instance's `status` and
`assernctl context ...` never ask the live process. `context_args` finds a context
server's root and database in the command line its configuration resolved to.

Standard library and attrs only: `assernctl` imports it without the tree.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.config.home import default_assern_home
from assern.actors.config.merge import database_path

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from assern.actors.config.spec import ResolvedConfig


def database_size(path: Path) -> int:
    """Bytes the database takes on disk, its write-ahead log included."""
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(f"{path}{suffix}").st_size
        except FileNotFoundError:
            pass
    return total


def read_index(path: Path) -> dict[str, Any] | None:
    """What the database at `path` holds: counts, size and the published state.

    Returns None when there is no database there. A database that cannot be read (being
    rebuilt, another schema) gives `{"error": ...}` with its size, not an exception.
    """
    if not path.is_file():
        return None
    import sqlite3  # here: an instance without a context server never loads it

    found: dict[str, Any] = {"database": str(path), "size_bytes": database_size(path)}
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error as exc:
        return {**found, "error": f"{type(exc).__name__}: {exc}"}
    try:
        files = db.execute("SELECT count(*) FROM files WHERE status = 'indexed'").fetchone()[0]
        skipped = db.execute("SELECT count(*) FROM files WHERE status != 'indexed'").fetchone()[0]
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        has_state = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'state'").fetchone()
        rows = db.execute("SELECT key, value FROM state").fetchall() if has_state else []
    except sqlite3.Error as exc:
        return {**found, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        db.close()
    state = {key: json.loads(value) for key, value in rows}
    return {**found, "files": files, "skipped": skipped, "chunks": chunks, **state}


@attrs.frozen(kw_only=True)
class ContextArgs:
    """What the instance passes a builtin context server: its root, database, secrets."""

    root: str
    db: str | None
    secrets: tuple[str, ...] = ()


def context_args(args: Sequence[str]) -> ContextArgs | None:
    """The root, database and secret patterns of a builtin context server, from the
    arguments its configuration resolved to (`-I -m assern.context --root ROOT ...`);
    None for any other server."""
    if "assern.context" not in args or "--root" not in args:
        return None
    found: dict[str, str] = {}
    secrets: list[str] = []
    for flag, value in itertools.pairwise(args):
        if flag in ("--root", "--db"):
            found[flag[2:]] = value
        elif flag == "--secret":
            secrets.append(value)
    return ContextArgs(root=found["root"], db=found.get("db"), secrets=tuple(secrets))


def progress_line(index: Mapping[str, Any], *, now: float | None = None) -> str:
    """One line saying where an index stands, for people.

    "indexing 40 of 120 files (33%), 5 s" while a walk's files are indexed, "checking
    the files" while it walks them, else "current" (or "not indexed yet"), with the last
    update's age.
    """
    if "error" in index:
        return f"unreadable: {index['error']}"
    now = time.time() if now is None else now
    progress = index.get("progress")
    if index.get("phase") == "indexing" and isinstance(progress, dict) and progress.get("total"):
        done, total = int(progress.get("done", 0)), int(progress["total"])
        since = now - float(progress.get("started_at", now))
        return f"indexing {done} of {total} files ({100 * done // total}%), {since:.0f} s"
    if index.get("phase") is None and not index.get("files"):
        return "not indexed yet"
    last = index.get("last_update")
    age = f", updated {_age(now - float(last))} ago" if isinstance(last, int | float) else ""
    if index.get("phase") in ("starting", "indexing"):
        return f"checking the files{age}"
    return f"current{age}"


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def context_servers(config: ResolvedConfig) -> dict[str, ContextArgs]:
    """The builtin context servers of `config`, by name."""
    found = {}
    for name, spec in config.servers.items():
        args = context_args(spec.args)
        if args is not None:
            found[name] = args
    return found


def database_of(args: ContextArgs, environ: Mapping[str, str]) -> Path:
    """The database a context server keeps its index in (the path it was given, else
    the one it computes itself under `$ASSERN_HOME`)."""
    if args.db is not None:
        return Path(args.db)
    return database_path(default_assern_home(environ), Path(args.root))


def index_entry(args: ContextArgs, environ: Mapping[str, str]) -> dict[str, Any]:
    """One context server's entry: its root, database and what it holds (blocking)."""
    db = database_of(args, environ)
    found = read_index(db)
    if found is None:
        return {"root": args.root, "database": str(db), "indexed": False}
    return {"root": args.root, **found, "indexed": True}
