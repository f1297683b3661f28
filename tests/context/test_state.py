"""What a context server publishes of its index (state.py), and how people read it."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from assern.actors.listener.context_index import context_args, progress_line, read_index
from assern.app.ctl.context import entry_lines
from assern.app.ctl.render import context_line
from assern.context.scan import ScanRules
from assern.context.server import ContextServer
from assern.context.state import write_state
from assern.context.store import Store


def test_the_state_is_written_and_read_back_with_the_counts(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    assert read_index(db) is None
    store = Store(db)
    try:
        store.run_write(lambda conn: write_state(conn, {"phase": "current", "pending": 3, "watcher": "off"}))
        with pytest.raises(ValueError, match="unknown state keys: phasse"):
            store.run_write(lambda conn: write_state(conn, {"phasse": "x"}))
    finally:
        store.close()
    found = read_index(db)
    assert found is not None
    assert (found["phase"], found["pending"], found["watcher"]) == ("current", 3, "off")
    assert (found["files"], found["chunks"], found["skipped"]) == (0, 0, 0)
    assert found["size_bytes"] == os.stat(db).st_size + (
        os.stat(f"{db}-wal").st_size if os.path.exists(f"{db}-wal") else 0
    )


def test_an_unreadable_database_is_said_not_raised(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    db.write_bytes(b"not a database at all" * 100)
    found = read_index(db)
    assert found is not None
    assert found["error"].startswith("DatabaseError: ")
    assert progress_line(found).startswith("unreadable: DatabaseError")


def test_context_args_are_read_from_the_resolved_command_line() -> None:
    args = ("-I", "-m", "assern.context", "--root", "/r", "--secret", "*.pem", "--db", "/d.sqlite3")
    found = context_args(args)
    assert found is not None
    assert (found.root, found.db, found.secrets) == ("/r", "/d.sqlite3", ("*.pem",))
    assert context_args(("-m", "mcp_server_time")) is None


def test_progress_and_status_lines() -> None:
    now = 1000.0
    indexing = {
        "indexed": True,
        "phase": "indexing",
        "progress": {"total": 120, "done": 40, "started_at": 995.0},
        "files": 40,
        "chunks": 90,
        "pending": 80,
        "watcher": "starting",
    }
    assert progress_line(indexing, now=now) == "indexing 40 of 120 files (33%), 5 s"
    current = {**indexing, "phase": "current", "pending": 0, "last_update": 700.0, "watcher": "watching"}
    assert progress_line(current, now=now) == "current, updated 5 min ago"
    assert progress_line({"phase": "starting", "files": 3}, now=now) == "checking the files"
    assert progress_line({}, now=now) == "not indexed yet"
    assert context_line(indexing, running=True).startswith(
        "index 40 files, 90 chunks, 80 pending, watcher starting; indexing 40 of 120"
    )
    assert context_line(current, running=False) == (
        "index 40 files, 90 chunks, 0 pending, watcher not running; as the last run left it"
    )
    entry: dict[str, Any] = {
        **current,
        "server": "code",
        "state": "ready",
        "pid": 7,
        "root": "/r",
        "database": "/d",
        "size_bytes": 3 * 1024 * 1024,
        "skipped": 2,
    }
    lines = entry_lines(entry, now=now)
    assert lines[0] == "code: /r (running, pid 7)"
    assert "  files     40 indexed (2 more left out: binary, too large or unreadable)" in lines
    assert lines[-1] == "  database  /d, 3.0 MB"


async def test_the_first_index_publishes_its_progress_batch_by_batch(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for number in range(450):  # three batches of index.BATCH_FILES
        (root / f"m{number}.py").write_text(f"def function_{number}():\n    return {number}\n")
    db = tmp_path / "db.sqlite3"
    server = ContextServer(root, ScanRules(), db, watch=False)
    seen: list[dict[str, Any]] = []
    run_batch = server.indexer.run_batch

    def watched(*args: Any) -> list[tuple[str, str]]:
        found = read_index(db)
        assert found is not None
        seen.append(found)
        return run_batch(*args)

    server.indexer.run_batch = watched  # type: ignore[method-assign,assignment]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)  # it keeps the index: runs until cancelled
            with trio.fail_after(30):
                await server.current.wait()
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()
    assert [(s["phase"], s["progress"]["done"], s["progress"]["total"], s["pending"]) for s in seen] == [
        ("indexing", 0, 450, 450),
        ("indexing", 200, 450, 250),
        ("indexing", 400, 450, 50),
    ]
    assert [s["files"] for s in seen] == [0, 200, 400]
    final = read_index(db)
    assert final is not None
    assert (final["phase"], final["pending"], final["files"], final["watcher"]) == ("current", 0, 450, "off")
    assert final["pid"] == os.getpid()
    assert final["last_index"]["files"] == 450
    assert final["last_index"]["seconds"] >= 0


async def test_a_signal_reindexes_what_no_stat_could_tell(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    path = root / "a.py"
    path.write_text("def alpha():\n    return 'wombat'\n")
    db = tmp_path / "db.sqlite3"
    server = ContextServer(root, ScanRules(), db, watch=False)

    def finds(word: str) -> bool:
        answer = server.engine.semantic_search(word, top_k=5, path=None)
        assert answer.structured is not None
        return bool(answer.structured["results"])

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.on_signals)
            nursery.start_soon(server.keep_index)
            with trio.fail_after(30):
                await server.current.wait()
            before = path.stat()
            path.write_text("def alpha():\n    return 'quokka'\n")
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            await server.bring_in_step()  # what a watcher or a restart would do: stat only
            assert finds("wombat")
            assert not finds("quokka")
            os.kill(os.getpid(), signal.SIGUSR1)
            with trio.fail_after(10):
                # the count is published (a thread writes the state) after it is set
                while (read_index(db) or {}).get("reindex_done", 0) < 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            assert finds("quokka")
            assert not finds("wombat")
            found = read_index(db)
            assert found is not None
            assert (found["reindex_asked"], found["reindex_done"]) == (1, 1)

            os.kill(os.getpid(), signal.SIGUSR2)  # --full: the database is rebuilt
            with trio.fail_after(10):
                # the count is published (a thread writes the state) after it is set
                while (read_index(db) or {}).get("reindex_done", 0) < 2:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            found = read_index(db)
            assert found is not None
            assert (found["files"], found["phase"], found["reindex_done"], found["pid"]) == (
                1,
                "current",
                2,
                os.getpid(),
            )
            assert server.store.rebuilt == "a full reindex was asked"
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()
