"""The database: batches are all-or-nothing, restarts re-read only what changed, breakage rebuilds."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assern.context.index import BATCH_FILES, Indexer, batches, plan
from assern.context.scan import FoundFile, ScanRules, scan
from assern.context.store import FileUpdate, Known, Store, database_path
from assern.context.terms import Terms


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def _index(root: Path, store: Store) -> tuple[int, int]:
    """Index `root` as the server does; (files re-read, files dropped)."""
    found = scan(root, ScanRules())
    known = store.known()
    todo = plan(found.files, known)
    indexer = Indexer(root, store, Terms(), max_file_size=1_000_000)
    deleted = todo.deleted
    for batch in batches(todo.changed) or [[]]:
        indexer.run_batch(batch, known, deleted)
        deleted = ()
    return len(todo.changed), len(todo.deleted)


def _search(store: Store, *words: str) -> list[str]:
    terms = Terms()
    found = [term for word in words for term in terms.terms(word)]
    return sorted({hit.path for hit in store.search(found, limit=50)})


def test_indexed_chunks_are_found_by_their_terms(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(
        root, {"retry.py": "def decide_backoff(attempt):\n    return 2 ** attempt\n", "other.py": "x = 1\n"}
    )
    store = Store(tmp_path / "db.sqlite3")
    assert _index(root, store) == (2, 0)
    assert _search(store, "backoff") == ["retry.py"]
    # the whole identifier is a term too, whichever way the question writes it
    assert _search(store, "decideBackoff") == ["retry.py"]
    assert store.counts() == (2, 2)


def test_a_restart_rereads_only_changed_files_and_drops_deleted_ones(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root, {f"m{i}.py": f"def f{i}():\n    pass\n" for i in range(5)})
    db = tmp_path / "db.sqlite3"
    store = Store(db)
    _index(root, store)
    ids_before = {hit.path: hit.chunk_id for hit in store.search(["f0", "f1"], limit=10)}
    store.close()

    (root / "m2.py").write_text("def renamed():\n    pass\n")
    (root / "m3.py").unlink()
    # same content, new mtime: read and hashed again, not re-chunked
    os.utime(root / "m1.py", ns=(1, 1))
    store = Store(db)
    assert _index(root, store) == (2, 1)
    assert _search(store, "renamed") == ["m2.py"]
    assert _search(store, "f3") == []
    ids_after = {hit.path: hit.chunk_id for hit in store.search(["f0", "f1"], limit=10)}
    assert ids_after == ids_before
    assert store.known()["m1.py"].mtime_ns == 1
    # nothing changed since: nothing is read
    assert _index(root, store) == (0, 0)


def test_deleted_and_rewritten_files_leave_nothing_in_the_lexical_index(tmp_path: Path) -> None:
    """The index keeps no copy of the terms: a deletion hands it back the very terms it
    was given, so that no stale term, document count or field length stays behind."""
    root = tmp_path / "root"
    _write(root, {"pkg/alpha_module.py": "class AlphaThing:\n    def beta_method(self):\n        pass\n"})
    _write(root, {"notes.md": "# Gamma heading\n\ndelta words\n"})
    store = Store(tmp_path / "db.sqlite3")
    _index(root, store)
    assert _search(store, "beta_method") == ["pkg/alpha_module.py"]
    (root / "pkg" / "alpha_module.py").write_text("def epsilon():\n    pass\n")
    (root / "notes.md").unlink()
    _index(root, store)
    assert _search(store, "beta_method") == []
    assert _search(store, "delta") == []
    assert _search(store, "epsilon") == ["pkg/alpha_module.py"]
    (root / "pkg" / "alpha_module.py").unlink()
    _index(root, store)
    raw = sqlite3.connect(store.path)
    try:
        assert raw.execute("SELECT count(*) FROM lexical_terms").fetchone() == (0,)
        assert raw.execute("SELECT chunks, symbol, path, body FROM totals").fetchone() == (0, 0, 0, 0)
        raw.execute("INSERT INTO lexical (lexical, rank) VALUES ('integrity-check', 0)")
    finally:
        raw.close()
    store.close()


def test_plan_compares_size_and_mtime() -> None:
    known = {
        "a": Known(size=1, mtime_ns=1, hash="h"),
        "b": Known(size=1, mtime_ns=1, hash="h"),
        "gone": Known(size=1, mtime_ns=1, hash="h"),
    }
    found = [
        FoundFile(path="a", size=1, mtime_ns=1),
        FoundFile(path="b", size=2, mtime_ns=1),
        FoundFile(path="new", size=1, mtime_ns=1),
    ]
    todo = plan(found, known)
    assert [f.path for f in todo.changed] == ["b", "new"]
    assert todo.deleted == ("gone",)


def test_batches_bound_files_and_bytes() -> None:
    files = [FoundFile(path=str(i), size=10, mtime_ns=0) for i in range(BATCH_FILES + 5)]
    assert [len(b) for b in batches(files)] == [BATCH_FILES, 5]
    big = [FoundFile(path=str(i), size=5_000_000, mtime_ns=0) for i in range(3)]
    assert [len(b) for b in batches(big)] == [1, 1, 1]


def test_binary_and_vanished_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root, {"blob.txt": b"abc\0def", "text.txt": "hello world\n", "bad.txt": b"caf\xe9 latin-1\n"})
    store = Store(tmp_path / "db.sqlite3")
    found = scan(root, ScanRules()).files
    (root / "text.txt").unlink()  # deleted between the walk and its reading
    Indexer(root, store, Terms(), max_file_size=1000).run_batch(found, {})
    assert sorted(store.known()) == ["bad.txt", "blob.txt"]
    assert store.counts() == (1, 1)  # the binary file is known (not read again) but not indexed
    assert _search(store, "latin") == ["bad.txt"]


def test_a_failing_batch_leaves_nothing_half_written(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    good = FileUpdate(path="a.py", size=1, mtime_ns=1, hash="x", chunks=(), terms=())
    bad = FileUpdate(path="b.py", size=1, mtime_ns=1, hash="x", chunks=[object()], terms=())  # type: ignore[list-item]
    with pytest.raises(ValueError, match="zip"):
        store.write([good, bad])
    assert store.known() == {}
    store.write([good])
    assert list(store.known()) == ["a.py"]


def test_a_corrupted_database_is_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    db.write_bytes(b"this is not a database at all" * 100)
    store = Store(db)
    assert store.rebuilt is not None
    assert store.known() == {}
    store.write([FileUpdate(path="a", size=1, mtime_ns=1, hash="h", chunks=(), terms=())])
    store.close()
    again = Store(db)
    assert again.rebuilt is None
    assert list(again.known()) == ["a"]


def test_a_database_of_another_schema_is_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    Store(db).close()
    raw = sqlite3.connect(db)
    try:
        with raw:  # a transaction: committed on leaving
            raw.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    finally:
        raw.close()
    store = Store(db)
    assert store.rebuilt is not None
    assert "schema" in store.rebuilt


def test_one_database_per_resolved_root(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    os.symlink(tmp_path / "a", tmp_path / "link")
    home = tmp_path / "home"
    assert database_path(home, tmp_path / "a") == database_path(home, tmp_path / "link")
    assert database_path(home, tmp_path / "a") != database_path(home, tmp_path)
    assert database_path(home, tmp_path / "a").parent == home / "cache" / "context"


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from assern.context import index, store
    from assern.context.scan import ScanRules, scan
    from assern.context.terms import Terms

    root, db = Path(sys.argv[1]), Path(sys.argv[2])
    index.BATCH_FILES = 10
    real = store.Store._write_file
    written = 0

    def write_then_die(self, update, *changes):
        global written
        written += 1
        if written == 15:  # in the middle of the second batch
            os.kill(os.getpid(), signal.SIGKILL)
        real(self, update, *changes)

    store.Store._write_file = write_then_die
    target = store.Store(db)
    found = scan(root, ScanRules()).files
    indexer = index.Indexer(root, target, Terms(), max_file_size=10**6)
    for batch in index.batches(found):
        indexer.run_batch(batch, {})
    """
)


def test_kill_9_in_the_middle_of_indexing_leaves_a_usable_database(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root, {f"m{i:02}.py": f"def function_{i}():\n    return {i}\n" for i in range(30)})
    db = tmp_path / "db.sqlite3"
    done = subprocess.run([sys.executable, "-c", KILLER, str(root), str(db)], capture_output=True, timeout=60)
    assert done.returncode == -9, done.stderr.decode()
    store = Store(db)
    assert store.rebuilt is None
    # the first batch is in, whole; nothing of the second
    assert sorted(store.known()) == [f"m{i:02}.py" for i in range(10)]
    assert store.counts() == (10, 10)
    # the next start indexes the rest
    assert _index(root, store) == (20, 0)
    assert store.counts() == (30, 30)


def test_a_file_the_chunker_fails_on_is_kept_in_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assern.context import index

    def fail(path: str, text: str) -> list[object]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(index, "chunk_file", fail)
    root = tmp_path / "root"
    _write(root, {"odd.py": "first_line = 1\nsecond_line = 2\n"})
    store = Store(tmp_path / "db.sqlite3")
    found = scan(root, ScanRules()).files
    problems = Indexer(root, store, Terms(), max_file_size=1000).run_batch(found, {})
    assert problems == [
        ("odd.py", "cut into line windows: its syntax tree could not be read (RecursionError)")
    ]
    assert _search(store, "second_line") == ["odd.py"]
