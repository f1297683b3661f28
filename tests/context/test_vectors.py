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


def test_an_unchanged_chunk_is_never_embedded_twice_even_after_a_restart(tmp_path: Path) -> None:
    root, db = tmp_path / "root", tmp_path / "db.sqlite3"
    write_tree(root, TREE)
    store = Store(db)
    index(root, store)
    first = CountingEmbedder()
    vectors = Vectorizer(store, lambda: first)
    assert vectors.catch_up() == chunk_count(store) == len(first.texts) == 4
    assert len(vectors.matrix) == 4
    assert vectors.catch_up() == 0  # nothing new: nothing embedded
    store.close()

    # a restart: a new store and vectorizer on the same database
    store = Store(db)
    index(root, store)
    again = CountingEmbedder()
    vectors = Vectorizer(store, lambda: again)
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
    root = tmp_path / "root"
    write_tree(root, TREE)
    store = Store(tmp_path / "db.sqlite3")
    index(root, store)
    embedder = CountingEmbedder()
    vectors = Vectorizer(store, lambda: embedder)
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
    matrix.put([(10, b"a", one.tobytes()), (11, b"b", two.tobytes())])
    assert matrix.nearest(one, 5) == [(10, 1.0), (11, 0.0)]
    matrix.drop([10])
    assert matrix.nearest(one, 5) == [(11, 0.0)]
    matrix.put([(12, b"c", one.tobytes())])  # takes the free row
    assert len(matrix) == 2
    assert matrix.nearest(one, 1) == [(12, 1.0)]
    matrix.put([(11, b"d", one.tobytes())])  # a chunk's vector replaced in place
    assert sorted(matrix.nearest(one, 5)) == [(11, 1.0), (12, 1.0)]
    assert matrix.keys() == {11: b"d", 12: b"c"}


def test_the_answers_are_lexical_while_the_vectors_are_pending(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_tree(root, TREE)
    store = Store(tmp_path / "db.sqlite3")
    index(root, store)
    state = IndexState(ready=True, complete=True)
    vectors = Vectorizer(store, CountingEmbedder)
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
    ranking = Ranking(mode="fused", signals=("symbol", "path", "role"), meaning=True, fusion=Fusion())
    server = ContextServer(root, ScanRules(), tmp_path / "db.sqlite3", watch=False, ranking=ranking)
    assert server.vectors is not None
    embedder = CountingEmbedder()
    embedder.gate.clear()  # the model is slow: vectors stay pending
    server.vectors._make = lambda: embedder
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            nursery.start_soon(server.vectors.keep, lambda: server.state.complete)
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
