"""The database deleted or overwritten under a running context server: the server
notices on its next use, rebuilds it from the files, logs it, and answers meanwhile."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from assern.context.scan import ScanRules
from assern.context.server import ContextServer
from assern.context.store import FileUpdate, Store, StoreLost


async def _until(check: Callable[[], Any], limit: float = 20.0) -> Any:
    with trio.fail_after(limit):
        while not (value := check()):  # noqa: ASYNC110 - the indexer's thread: nothing to wait on
            await trio.sleep(0.05)
        return value


def _tree(root: Path, count: int) -> None:
    root.mkdir()
    for i in range(count):
        (root / f"mod_{i}.py").write_text(f"def function_{i}():\n    return {i}\n")


async def _search(server: ContextServer, query: str) -> dict[str, Any]:
    answer = await server.answer("semantic_search", {"query": query})
    assert answer.structured is not None
    found: dict[str, Any] = answer.structured
    return found


def _checkpoint(db: Path) -> None:
    """Move the WAL's pages into the database file, so that it holds the whole index."""
    raw = sqlite3.connect(db)
    try:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()


def _break(db: Path, how: str) -> None:
    if how == "deleted":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    else:  # overwritten in place, the same file
        size = max(db.stat().st_size, 4096)
        with open(db, "r+b") as file:
            file.write(os.urandom(size))


@pytest.mark.parametrize("how", ["deleted", "overwritten"])
async def test_a_broken_database_is_rebuilt_while_serving(tmp_path: Path, how: str) -> None:
    root = tmp_path / "root"
    _tree(root, 30)
    db = tmp_path / "db.sqlite3"
    server = ContextServer(root, ScanRules(), db, watch=False)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            await _until(lambda: server.state.ready)
            _checkpoint(db)
            assert [r["path"] for r in (await _search(server, "function_7"))["results"]][:1] == ["mod_7.py"]

            _break(db, how)
            with capture_logs() as logs:
                # the next query notices, answers (no crash), and the index is made again
                answer = await _search(server, "function_7")
                assert set(answer["index"]) == {"files", "pending"}
                await _until(lambda: server.state.ready)
                found = await _search(server, "function_12")
            assert found["index"] == {"files": 30, "pending": 0}
            assert [r["path"] for r in found["results"]][:1] == ["mod_12.py"]
            rebuilt = [entry for entry in logs if entry["event"] == "context index rebuilt"]
            assert len(rebuilt) == 1
            assert ("deleted" if how == "deleted" else "overwritten") in rebuilt[0]["reason"]
            assert server.store.generation == 1
            assert db.read_bytes()[:16] == b"SQLite format 3\0" or not db.stat().st_size
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()


async def test_a_write_into_a_deleted_database_makes_the_indexer_rebuild(tmp_path: Path) -> None:
    """A file event after the deletion: the indexer's write notices, not only a query."""
    root = tmp_path / "root"
    _tree(root, 5)
    db = tmp_path / "db.sqlite3"
    server = ContextServer(root, ScanRules(), db)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            await _until(lambda: server.state.ready)
            _break(db, "deleted")
            with capture_logs() as logs:
                (root / "late.py").write_text("def latecomer():\n    pass\n")
                await _until(lambda: db.exists() and server.store.generation == 1)
                await _until(lambda: server.state.ready)
                await _until(lambda: server.store.counts()[0] == 6)
            assert [entry["event"] for entry in logs].count("context index rebuilt") == 1
            found = await _search(server, "latecomer")
            assert [r["path"] for r in found["results"]] == ["late.py"]
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()


async def test_damage_found_by_the_check_after_a_start_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    _tree(root, 3)
    server = ContextServer(root, ScanRules(), tmp_path / "db.sqlite3", watch=False)
    monkeypatch.setattr(Store, "check", lambda self: "quick_check: *** in database main ***")
    try:
        with capture_logs() as logs:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.keep_index)
                nursery.start_soon(server.check_database)
                await _until(lambda: server.store.generation == 1 and server.state.ready)
                nursery.cancel_scope.cancel()
        assert any("quick_check" in entry.get("reason", "") for entry in logs)
        assert server.store.counts()[0] == 3
    finally:
        server.store.close()


def test_the_store_tells_a_deleted_or_overwritten_file(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    store = Store(db)
    update = FileUpdate(path="a", size=1, mtime_ns=1, hash="h", chunks=(), terms=())
    store.write([update])
    _checkpoint(db)
    assert store.check() is None
    db.write_bytes(b"garbage" * 1000)  # the same file, overwritten
    with pytest.raises(StoreLost, match="overwritten"):
        store.known()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreLost, match="deleted"):
        store.write([update])
    assert isinstance(StoreLost("x"), sqlite3.DatabaseError)
    store.rebuild("test")
    assert store.known() == {}
    store.close()
