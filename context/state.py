"""What a context server publishes of its index, in its own database, for people to read.

The process writes a small `state` table next to its index (server.py, `publish`): its
pid, the phase of its index ("starting" while it walks the root, "indexing" while a
walk's files are being indexed, "current" after), the progress of the running index
(files done of how many, since when), how many files are pending, the watcher's state,
when the index last changed, how long the last complete index took, and a count of the
reindexes asked and done, and with the semantic extra the vectors' state (`vectors`:
vectors.py's `Vectorizer.state_doc`, or null when the ranking uses no vectors). Each
value is JSON, under one of `KEYS`.

The instance and `assernctl` read it back, read-only, with the counts of the index
itself (assern.actors.listener.context_index, which keeps to this table's layout:
nothing imports this package, a process of its own), so they never need the live
process for a status and never slow it down.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping

_SCHEMA = "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

#: The keys `publish` writes (anything else is refused: a typo would otherwise go unread).
KEYS = frozenset(
    {
        "pid",
        "root",
        "started_at",
        "phase",
        "watcher",
        "pending",
        "progress",
        "last_update",
        "last_index",
        "reindex_asked",
        "reindex_done",
        "vectors",
    }
)

#: Watcher states: starting (the first walk runs, the watches are not set yet),
#: watching, off (`--no-watch`), stopped (it failed; the log says why).
WATCHER_STATES = ("starting", "watching", "off", "stopped")


def write_state(db: sqlite3.Connection, values: Mapping[str, Any]) -> None:
    """Write `values` into `db`'s state table (the caller holds the transaction)."""
    unknown = set(values) - KEYS
    if unknown:
        raise ValueError(f"unknown state keys: {', '.join(sorted(unknown))}")
    db.execute(_SCHEMA)
    db.executemany(
        "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)",
        [(key, json.dumps(value)) for key, value in values.items()],
    )
