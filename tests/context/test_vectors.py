"""The chunks' vectors (context/vectors.py): cached by content hash in the root's database,
never embedded twice (restarts included), held in memory in step with the index, and
computed in the background while the answers stay lexical."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from assern.context import vectors as vectors_module
from assern.context.fusion import Fusion, Meaning
from assern.context.index import Indexer, plan
from assern.context.scan import ScanRules, SecretFilter, scan
from assern.context.server import ContextServer, Ranking
from assern.context.store import Store
from assern.context.terms import Terms
from assern.context.tools import Engine, IndexState
from assern.context.vectors import DIMENSIONS, Matrix, Vectorizer, embedded_text, vector_key

np = pytest.importorskip("numpy")

TREE = {
    "weather.py": '''
def forecast_rain(city):
    """Predict precipitation for a city from the barometer readings."""
    return barometer(city).pressure < 1000
''',
    "music.py": '''
def play_song(track):
    """Send the audio track to the speakers."""
    speakers.write(track.samples)


def stop_song(track):
    speakers.close()
''',
    "refunds.py": '''
def reimburse_purchase(order, amount):
    """Give the buyer their payment back when an order is returned."""
    ledger.credit(order.buyer, amount)
''',
}


class CountingEmbedder:
    """A deterministic stand-in for the model: each text's vector from its hash; counts
    the texts it is given (and can be held, to keep vectors pending)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def embed(self, texts: Sequence[str]) -> Any:
        self.gate.wait(10)
        self.texts += texts
        rows = []
        for text in texts:
            seed = int.from_bytes(vector_key(text)[:4], "little")
            row = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.array(rows, dtype=np.float32)


def write_tree(root: Path, tree: dict[str, str]) -> None:
    for name, text in tree.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))


def index(root: Path, store: Store) -> None:
    found = scan(root, ScanRules(), secret=SecretFilter(()))
    known = store.known()
    todo = plan(found.files, known)
    Indexer(root, store, Terms(), max_file_size=1_000_000).run_batch(todo.changed, known, todo.deleted)


def chunk_count(store: Store) -> int:
    return store.counts()[1]


def indexed_tree(tmp_path: Path) -> tuple[Path, Store]:
    """The test tree written under `tmp_path` and indexed into a fresh database."""
    root = tmp_path / "root"
    write_tree(root, TREE)
    store = Store(tmp_path / "db.sqlite3")
    index(root, store)
    return root, store


def counted(store: Store) -> tuple[CountingEmbedder, Vectorizer]:
    """A vectorizer of `store` whose model is a counting embedder."""
    embedder = CountingEmbedder()
    return embedder, Vectorizer(store, lambda dimensions: embedder)


def fused_server(root: Path, tmp_path: Path) -> ContextServer:
    """A context server of `root` ranking fused (words and meaning), not watching."""
    ranking = Ranking(mode="fused", signals=("symbol", "path", "role"), meaning=True, fusion=Fusion())
    return ContextServer(root, ScanRules(), tmp_path / "db.sqlite3", watch=False, ranking=ranking)


def test_an_unchanged_chunk_is_never_embedded_twice_even_after_a_restart(tmp_path: Path) -> None:
    root, db = tmp_path / "root", tmp_path / "db.sqlite3"
    write_tree(root, TREE)
    store = Store(db)
    index(root, store)
    first = CountingEmbedder()
    vectors = Vectorizer(store, lambda dimensions: first)
    assert vectors.catch_up() == chunk_count(store) == len(first.texts) == 4
    assert len(vectors.matrix) == 4
    assert vectors.catch_up() == 0  # nothing new: nothing embedded
    store.close()

    # a restart: a new store and vectorizer on the same database
    store = Store(db)
    index(root, store)
    again = CountingEmbedder()
    vectors = Vectorizer(store, lambda dimensions: again)
    assert vectors.catch_up() == 0
    assert again.texts == []
    assert len(vectors.matrix) == 4  # the vectors came from the database
    assert vectors.pending_files == 0

    # one function of music.py changes: only that chunk is embedded
    changed = TREE["music.py"].lstrip("\n").replace("speakers.close()", "speakers.mute()")
    (root / "music.py").write_text(changed)
    index(root, store)
    assert vectors.pending_files >= 1  # the index changed: not known current
    assert vectors.catch_up() == 1
    assert len(again.texts) == 1
    assert "speakers.mute()" in again.texts[0]
    assert len(vectors.matrix) == 4

    # and back again: that text's vector is still cached
    (root / "music.py").write_text(TREE["music.py"].lstrip("\n"))
    index(root, store)
    assert vectors.catch_up() == 0
    assert len(again.texts) == 1

    # a deleted file's chunks leave the matrix
    (root / "refunds.py").unlink()
    index(root, store)
    vectors.catch_up()
    assert len(vectors.matrix) == 3
    store.close()


def test_the_vectors_in_memory_are_those_of_the_chunks_now(tmp_path: Path) -> None:
    _root, store = indexed_tree(tmp_path)
    _embedder, vectors = counted(store)
    vectors.catch_up()
    # each chunk's row is the vector of its own text
    rows = store.run(lambda db: db.execute("SELECT chunks.id, files.path, symbol, text FROM chunks "
                                           "JOIN files ON files.id = file_id").fetchall())  # fmt: skip
    for chunk_id, path, symbol, text in rows:
        vector = CountingEmbedder().embed([embedded_text(path, symbol, text)])[0]
        [(nearest, similarity)] = vectors.matrix.nearest(vector, 1)
        assert nearest == chunk_id
        assert similarity == pytest.approx(1.0)
    store.close()


def test_the_matrix_reuses_rows_and_forgets_dropped_chunks() -> None:
    matrix = Matrix(dimensions=2)
    one, two = np.array([1, 0], dtype=np.float32), np.array([0, 1], dtype=np.float32)
    matrix.put([10, 11], np.stack([one, two]))
    assert matrix.nearest(one, 5) == [(10, 1.0), (11, 0.0)]
    assert matrix.drop([10, 99]) == 1
    assert matrix.nearest(one, 5) == [(11, 0.0)]
    matrix.put([12], one[None, :])  # takes the free row
    assert len(matrix) == 2
    assert matrix._used == 2
    assert matrix.nearest(one, 1) == [(12, 1.0)]
    matrix.drop([11])  # a chunk's vector replaced: dropped, then put again
    matrix.put([11], one[None, :])
    assert sorted(matrix.nearest(one, 5)) == [(11, 1.0), (12, 1.0)]
    assert matrix.ids() == {11, 12}
    # grown past its room, every row is kept
    matrix.put(list(range(100, 3100)), np.tile(two, (3000, 1)))
    assert len(matrix) == 3002
    assert sorted(matrix.nearest(one, 2)) == [(11, 1.0), (12, 1.0)]
    assert len(matrix.nearest(two, 5000)) == 3002


def test_the_answers_are_lexical_while_the_vectors_are_pending(tmp_path: Path) -> None:
    root, store = indexed_tree(tmp_path)
    state = IndexState(ready=True, complete=True)
    vectors = Vectorizer(store, lambda dimensions: CountingEmbedder())
    fused = Engine(root, store, Terms(), SecretFilter(()), state, meaning=Meaning(vectors, Fusion()))
    lexical = Engine(root, store, Terms(), SecretFilter(()), state)
    question = "the buyer's payment back"
    before = fused.semantic_search(question, top_k=10, path=None).structured
    words = lexical.semantic_search(question, top_k=10, path=None).structured
    assert before is not None
    assert words is not None
    assert before["results"] == words["results"]
    assert before["index"] == {"files": 3, "pending": 1, "vectors_pending": 1}
    assert "still wait for their vectors" in fused.semantic_search(question, top_k=10, path=None).texts[0]

    vectors.catch_up()
    after = fused.semantic_search(question, top_k=10, path=None).structured
    assert after is not None
    assert after["index"] == {"files": 3, "pending": 0}
    # now the meaning ranks too: chunks that share no word with the question come in
    assert len(after["results"]) > len(words["results"])
    store.close()


async def test_the_server_embeds_in_the_background_and_answers_meanwhile(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    server = fused_server(root, tmp_path)
    assert server.vectors is not None
    embedder = CountingEmbedder()
    embedder.gate.clear()  # the model is slow: vectors stay pending
    server.vectors._make = lambda dimensions: embedder
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            nursery.start_soon(server.vectors.keep)
            with trio.fail_after(20):
                while not server.state.complete:  # noqa: ASYNC110 - a plain flag
                    await trio.sleep(0.02)
                await trio.sleep(0.3)  # the vectorizer is inside the model by now
                answer = await trio.to_thread.run_sync(
                    lambda: server.engine.semantic_search("payment back", top_k=5, path=None)
                )
                assert answer.structured is not None
                assert answer.structured["results"][0]["path"] == "refunds.py"  # by its words
                assert answer.structured["index"]["vectors_pending"] >= 1
                assert embedder.texts == []
                embedder.gate.set()
                while server.engine.index_info()["pending"]:  # noqa: ASYNC110 - a plain flag
                    await trio.sleep(0.02)
            assert len(embedder.texts) == 4
            nursery.cancel_scope.cancel()
    finally:
        embedder.gate.set()
        server.store.close()


def _current(vectors: Vectorizer) -> bool:
    return vectors.current


def file_chunk_ids(store: Store, path: str) -> set[int]:
    """The ids of the chunks of the file at `path`."""
    rows = store.run(
        lambda db: db.execute(
            "SELECT chunks.id FROM chunks JOIN files ON files.id = file_id WHERE path = ?", (path,)
        ).fetchall()
    )
    return {row[0] for row in rows}


def test_after_the_first_look_only_the_chunks_the_index_changed_are_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    many = {f"pkg/module_{n}.py": f"def function_{n}(value):\n    return value + {n}\n" for n in range(40)}
    write_tree(root, {**TREE, **many})
    store = Store(tmp_path / "db.sqlite3")
    index(root, store)
    embedder, vectors = counted(store)
    assert vectors.catch_up() == 44
    assert (vectors.rows_read, vectors.loads) == (44, 1)

    # one file saved: its chunks alone are read and embedded (the new one), nothing else
    (root / "music.py").write_text(TREE["music.py"].lstrip("\n") + "\n\ndef pause_song(track):\n    pass\n")
    index(root, store)
    assert not _current(vectors)
    assert vectors.catch_up() == 1
    assert (vectors.rows_read, vectors.loads) == (44 + 3, 1)
    assert "pause_song" in embedder.texts[-1]
    every = {chunk_id for path in [*TREE, *many] for chunk_id in file_chunk_ids(store, path)}
    assert vectors.matrix.ids() == every

    # a deleted file's vectors leave the matrix; nothing is read or embedded for it
    gone = file_chunk_ids(store, "refunds.py")
    (root / "refunds.py").unlink()
    index(root, store)
    assert vectors.catch_up() == 0
    assert vectors.rows_read == 47
    assert not gone & vectors.matrix.ids()
    assert len(vectors.matrix) == chunk_count(store) == 44
    assert _current(vectors)
    assert vectors.loads == 1
    store.close()


def test_a_chunk_id_reused_by_sqlite_gets_the_vector_of_its_new_text(tmp_path: Path) -> None:
    root, store = indexed_tree(tmp_path)
    _embedder, vectors = counted(store)
    vectors.catch_up()
    # the file holding the highest chunk ids is rewritten: SQLite gives its new chunks
    # the same ids again, so the ids alone cannot tell the old vectors from the new
    last = max(file_chunk_ids(store, path) for path in TREE)
    [path] = [path for path in TREE if file_chunk_ids(store, path) == last]
    (root / path).write_text("def brand_new_thing():\n    return 'unrelated'\n")
    index(root, store)
    assert file_chunk_ids(store, path) & last  # an id came back
    vectors.catch_up()
    [new_id] = file_chunk_ids(store, path)
    text = store.run(lambda db: db.execute("SELECT text FROM chunks WHERE id = ?", (new_id,)).fetchone()[0])
    expected = CountingEmbedder().embed([embedded_text(path, "brand_new_thing", text)])[0]
    [(nearest, similarity)] = vectors.matrix.nearest(expected, 1)
    assert nearest == new_id
    assert similarity == pytest.approx(1.0)
    assert len(vectors.matrix) == chunk_count(store)
    store.close()


def test_a_restart_reads_every_vector_in_one_pass_without_the_store_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, db = tmp_path / "root", tmp_path / "db.sqlite3"
    write_tree(root, TREE)
    store = Store(db)
    index(root, store)
    Vectorizer(store, lambda dimensions: CountingEmbedder()).catch_up()
    store.close()

    store = Store(db)
    reads: list[bool] = []
    real = vectors_module._load

    def load(connection: Any, dimensions: int) -> Any:
        reads.append(store._lock.locked())  # the tools and the indexer go on meanwhile
        return real(connection, dimensions)

    monkeypatch.setattr(vectors_module, "_load", load)
    vectors = Vectorizer(store, lambda dimensions: CountingEmbedder())
    vectors.load()
    assert reads == [False]
    assert len(vectors.matrix) == 4
    assert vectors.waiting_chunks == 0
    assert vectors.pending_files == 1  # not yet known current with the index
    assert vectors.catch_up() == 0
    assert (vectors.rows_read, vectors.loads, vectors.pending_files) == (0, 1, 0)
    store.close()


def test_the_vectors_state_says_what_waits(tmp_path: Path) -> None:
    _root, store = indexed_tree(tmp_path)
    published: list[dict[str, Any]] = []
    vectors = Vectorizer(
        store, lambda dimensions: CountingEmbedder(), publish=lambda doc: published.append(dict(doc))
    )
    vectors.load()
    assert vectors.state_doc() == {
        "state": "loading", "chunks": 0, "pending_chunks": 4, "pending_files": 3, "dimensions": DIMENSIONS
    }  # fmt: skip
    vectors.catch_up()
    assert published[0]["state"] == "embedding"
    assert (published[0]["pending_chunks"], published[0]["pending_files"]) == (4, 3)
    assert published[-1] == {
        "state": "current", "chunks": 4, "pending_chunks": 0, "pending_files": 0, "dimensions": DIMENSIONS
    }  # fmt: skip
    store.close()


def test_a_question_is_not_held_up_while_the_model_loads(tmp_path: Path) -> None:
    _root, store = indexed_tree(tmp_path)
    Vectorizer(store, lambda dimensions: CountingEmbedder()).catch_up()
    loading = threading.Event()

    def slow_model(dimensions: int) -> CountingEmbedder:
        loading.wait(10)
        return CountingEmbedder()

    vectors = Vectorizer(store, slow_model)
    vectors.load()
    loader = threading.Thread(target=lambda: vectors.embedder)
    loader.start()
    try:
        assert vectors.nearest("payment back", 5) == []  # the words answer meanwhile
    finally:
        loading.set()
        loader.join()
    assert len(vectors.nearest("payment back", 5)) == 4
    store.close()


async def test_a_first_index_is_embedded_batch_by_batch_while_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vectors do not wait for the whole first index by words: the tokenizer leaves
    the GIL, so embedding the batches written so far uses the core the indexer leaves."""
    root = tmp_path / "root"
    many = {f"pkg/module_{n}.py": f"def function_{n}(value):\n    return value + {n}\n" for n in range(40)}
    write_tree(root, many)
    monkeypatch.setattr("assern.context.index.BATCH_FILES", 10)
    embedder = CountingEmbedder()
    embedded = threading.Event()
    real_embed = embedder.embed

    def embed(texts: Sequence[str]) -> Any:
        embedded.set()
        return real_embed(texts)

    monkeypatch.setattr(embedder, "embed", embed)
    # the indexer writes its first batch, then waits (at most 10 s) for the vectors
    real_batch = Indexer.run_batch
    batches: list[bool] = []

    def run_batch(self: Indexer, *args: Any) -> Any:
        problems = real_batch(self, *args)
        batches.append(embedded.wait(10) if not batches else embedded.is_set())
        return problems

    monkeypatch.setattr(Indexer, "run_batch", run_batch)
    server = fused_server(root, tmp_path)
    assert server.vectors is not None
    server.vectors._make = lambda dimensions: embedder
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            nursery.start_soon(server.vectors.keep)
            with trio.fail_after(30):
                while not server.state.complete or server.engine.index_info()["pending"]:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()
    assert len(batches) == 4
    assert batches[0], "nothing was embedded while the first index was being written"
    assert len(embedder.texts) == 40
