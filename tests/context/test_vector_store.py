"""Where the chunks' vectors are kept (store.py's tables, vectors.py's reads and writes):
each beside its chunk, read at a start in one scan; a deleted chunk's vector leaves the
chunk's table and memory for the cache by key; a database of the schema before is
migrated in place, every vector kept; a kill -9 while vectors are written loses at most
the batch under way."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from assern.context import vectors as vectors_module
from assern.context.scan import ScanRules
from assern.context.server import ContextServer
from assern.context.store import SCHEMA_VERSION, Store
from assern.context.vectors import Vectorizer

from .test_vectors import (
    TREE,
    CountingEmbedder,
    chunk_count,
    counted,
    file_chunk_ids,
    index,
    indexed_tree,
    write_tree,
)

np = pytest.importorskip("numpy")

#: The vectors' tables as schema 4 had them: each vector once per key, and which chunk
#: has which key (read at a start through a join of the two).
SCHEMA_4 = """
DROP TRIGGER chunk_vectors_gone;
ALTER TABLE chunk_vectors RENAME TO chunk_vectors_now;
ALTER TABLE vectors RENAME TO vectors_now;
CREATE TABLE vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE chunk_vectors (chunk_id INTEGER PRIMARY KEY, key BLOB NOT NULL);
INSERT INTO vectors SELECT key, vector FROM chunk_vectors_now;
INSERT OR IGNORE INTO vectors SELECT key, vector FROM vectors_now;
INSERT INTO chunk_vectors SELECT chunk_id, key FROM chunk_vectors_now;
DROP TABLE chunk_vectors_now;
DROP TABLE vectors_now;
CREATE TRIGGER chunk_vectors_gone AFTER DELETE ON chunks
    BEGIN DELETE FROM chunk_vectors WHERE chunk_id = old.id; END;
UPDATE meta SET value = '4' WHERE key = 'schema';
"""


def _rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    return store.run(lambda db: db.execute(sql).fetchall())


def _held(vectors: Vectorizer) -> dict[int, bytes]:
    """Each chunk id held in memory, with its vector's bytes."""
    matrix = vectors.matrix
    used = matrix._ids[: matrix._used]
    return {int(chunk): matrix._vectors[row].tobytes() for row, chunk in enumerate(used) if chunk >= 0}


def test_each_vector_is_kept_beside_its_chunk_and_read_back_in_one_scan(tmp_path: Path) -> None:
    _root, store = indexed_tree(tmp_path)
    vectors = Vectorizer(store, lambda dimensions: CountingEmbedder())
    vectors.catch_up()
    rows = _rows(store, "SELECT chunk_id, vector FROM chunk_vectors ORDER BY chunk_id")
    assert [row[0] for row in rows] == sorted(vectors.matrix.ids())
    assert _rows(store, "SELECT count(*) FROM vectors") == [(0,)]  # the cache holds no chunk's vector
    again = Vectorizer(store, lambda dimensions: CountingEmbedder())
    again.load()
    assert _held(again) == dict(rows)
    assert again.waiting_chunks == 0
    store.close()


def test_a_deleted_chunk_leaves_memory_and_disk_and_its_vector_waits_in_the_cache(tmp_path: Path) -> None:
    root, store = indexed_tree(tmp_path)
    embedder, vectors = counted(store)
    vectors.catch_up()
    gone = file_chunk_ids(store, "music.py")
    keys = {row[0] for row in _rows(store, f"SELECT key FROM chunk_vectors WHERE chunk_id IN {tuple(gone)}")}
    assert len(gone) == len(keys) == 2

    (root / "music.py").unlink()
    index(root, store)
    vectors.catch_up()
    assert not gone & vectors.matrix.ids()  # memory
    on_disk = f"SELECT count(*) FROM chunk_vectors WHERE chunk_id IN {tuple(gone)}"
    assert _rows(store, on_disk) == [(0,)]
    assert {row[0] for row in _rows(store, "SELECT key FROM vectors")} == keys  # kept by key only
    assert len(vectors.matrix) == chunk_count(store) == 2

    # the file comes back: its vectors come from the cache, which lets them go
    write_tree(root, {"music.py": TREE["music.py"]})
    index(root, store)
    assert vectors.catch_up() == 0
    assert len(embedder.texts) == 4
    assert _rows(store, "SELECT count(*) FROM vectors") == [(0,)]
    assert len(vectors.matrix) == chunk_count(store) == 4
    store.close()


def test_the_cache_keeps_its_newest_vectors_once_it_outgrows_the_chunks(tmp_path: Path) -> None:
    _root, store = indexed_tree(tmp_path)
    Vectorizer(store, lambda dimensions: CountingEmbedder()).catch_up()

    def fill(db: sqlite3.Connection) -> None:
        db.executemany(
            "INSERT INTO vectors (key, vector) VALUES (?, ?)",
            [(index.to_bytes(16, "big"), b"\0" * 256) for index in range(1010)],
        )

    store.run_write(fill)
    assert store.run(vectors_module._prune) == 1010 - 4  # as many kept as chunks have vectors
    kept = [int.from_bytes(row[0], "big") for row in _rows(store, "SELECT key FROM vectors ORDER BY id")]
    assert kept == [1006, 1007, 1008, 1009]
    assert store.run(vectors_module._prune) == 0
    store.close()


def _make_schema_4(db: Path) -> None:
    raw = sqlite3.connect(db, isolation_level=None)
    try:
        raw.executescript(f"BEGIN; {SCHEMA_4} COMMIT;")
    finally:
        raw.close()


def test_a_database_of_schema_4_is_migrated_in_place_keeping_every_vector(tmp_path: Path) -> None:
    root, db = tmp_path / "root", tmp_path / "db.sqlite3"
    write_tree(root, TREE)
    store = Store(db)
    index(root, store)
    vectors = Vectorizer(store, lambda dimensions: CountingEmbedder())
    vectors.catch_up()
    (root / "refunds.py").unlink()  # one vector in the cache, held by no chunk
    index(root, store)
    vectors.catch_up()
    before = _held(vectors)
    cached = _rows(store, "SELECT key, vector FROM vectors")
    assert len(before) == 3
    assert len(cached) == 1
    store.close()
    _make_schema_4(db)

    with capture_logs() as logs:
        server = ContextServer(root, ScanRules(), db, watch=False)
    store = server.store
    assert store.rebuilt is None
    assert store.migrated is not None
    assert (store.migrated.old, store.migrated.new) == ("4", SCHEMA_VERSION)
    [told] = [entry for entry in logs if entry["event"] == "context index migrated"]
    assert (told["schema_from"], told["schema_to"]) == ("4", SCHEMA_VERSION)
    assert _rows(store, "SELECT value FROM meta WHERE key = 'schema'") == [(SCHEMA_VERSION,)]

    embedder = CountingEmbedder()
    again = Vectorizer(store, lambda dimensions: embedder)
    assert again.catch_up() == 0  # nothing embedded again
    assert _held(again) == before
    assert _rows(store, "SELECT key, vector FROM vectors") == cached

    # the trigger of the new schema works: a deleted file's vectors move to the cache
    gone = file_chunk_ids(store, "music.py")
    (root / "music.py").unlink()
    index(root, store)
    again.catch_up()
    assert not gone & again.matrix.ids()
    assert _rows(store, "SELECT count(*) FROM chunk_vectors") == [(1,)]
    assert _rows(store, "SELECT count(*) FROM vectors") == [(3,)]
    store.close()

    reopened = Store(db)
    assert reopened.migrated is None  # once only
    assert reopened.rebuilt is None
    reopened.close()


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import numpy as np
    from assern.context import vectors
    from assern.context.index import Indexer, plan
    from assern.context.scan import ScanRules, scan
    from assern.context.store import Store
    from assern.context.terms import Terms

    class Model:
        def embed(self, texts):
            rows = np.random.default_rng(len(texts)).standard_normal((len(texts), 64))
            return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    root, db = Path(sys.argv[1]), Path(sys.argv[2])
    store = Store(db)
    found = scan(root, ScanRules()).files
    Indexer(root, store, Terms(), max_file_size=10**6).run_batch(plan(found, {}).changed, {})
    vectors.EMBED_BATCH = 10
    real = vectors._save
    saves = 0

    def save_then_die(db, known, chunks, cached=()):
        global saves
        saves += 1
        if saves == 2:  # the second batch dies in the middle of its transaction
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM chunk_vectors")
            db.execute("INSERT INTO chunk_vectors VALUES (?, ?, ?)", (chunks[0][0], b"k", b"v"))
            os.kill(os.getpid(), signal.SIGKILL)
        return real(db, known, chunks, cached)

    vectors._save = save_then_die
    vectors.Vectorizer(store, lambda dimensions: Model()).catch_up()
    """
)


def test_kill_9_while_vectors_are_written_leaves_whole_batches(tmp_path: Path) -> None:
    root, db = tmp_path / "root", tmp_path / "db.sqlite3"
    write_tree(root, {f"m{i:02}.py": f"def function_{i}():\n    return {i}\n" for i in range(30)})
    done = subprocess.run([sys.executable, "-c", KILLER, str(root), str(db)], capture_output=True, timeout=60)
    assert done.returncode == -9, done.stderr.decode()
    store = Store(db)
    assert store.rebuilt is None
    # the first batch is in, whole; nothing of the second
    rows = _rows(store, "SELECT chunk_id, length(vector) FROM chunk_vectors ORDER BY chunk_id")
    first = [row[0] for row in _rows(store, "SELECT id FROM chunks ORDER BY id LIMIT 10")]
    assert rows == [(chunk_id, 256) for chunk_id in first]
    _embedder, vectors = counted(store)
    assert vectors.catch_up() == 20  # the next start embeds the rest
    assert len(vectors.matrix) == chunk_count(store) == 30
    store.close()
