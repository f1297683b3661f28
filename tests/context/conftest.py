"""Every SQLite database a context test opens is closed when the test ends.

Tests build stores and servers freely and let them go; from Python 3.13 a connection
left to the garbage collector warns (ResourceWarning, an error in this suite), in
whichever test the collector happens to run. The product closes its store when it
stops serving (context/server.py); here each connection opened is closed at teardown.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from assern.context.store import Store


@pytest.fixture(autouse=True)
def _databases_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    opened: list[sqlite3.Connection] = []
    real_open = Store._open

    def tracked(self: Store) -> sqlite3.Connection:
        db = real_open(self)
        opened.append(db)
        return db

    monkeypatch.setattr(Store, "_open", tracked)
    yield
    for db in opened:
        db.close()
