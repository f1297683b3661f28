"""The meaning of each chunk: vectors computed in the background, cached by content hash.

With the `assern[semantic]` extra installed, the context server ranks by meaning as well
as by words (fusion.py). The model is the extra's (WordLlama's `l2_supercat`, 256
dimensions, loaded from its wheel with downloads disabled: actors/search/semantic.py).

What is embedded of a chunk is `embedded_text`: its path and symbol in words, then its
text, cut at `TEXT_LIMIT` characters. Its key is a hash of the model's name and that
text (`vector_key`), so a chunk whose text did not change is never embedded again: not
after an edit elsewhere in its file, a rename back, a `git checkout` there and back, nor
a restart. Two tables of the root's database (store.py) hold them: `vectors` (key →
float32 vector) and `chunk_vectors` (chunk id → key; a trigger drops a chunk's row with
the chunk).

`Vectorizer` does the work, blocking (the server runs it in a worker thread, after the
first lexical index is complete, so it never delays that index nor any answer): it
takes the chunks without a vector in batches of `EMBED_BATCH`, reuses every vector its
key already has, embeds the rest, and writes each batch in one transaction. The vectors
of the indexed chunks are also held in memory (`Matrix`), where a question's nearest
chunks are found by one matrix product. Until a chunk has its vector it is found by its
words only; `pending_files` says how many files still wait.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

from assern.actors.search.text import words

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    import numpy as np
    import numpy.typing as npt

    from assern.context.store import Hit, Store

    Floats = npt.NDArray[np.float32]

log = structlog.get_logger("assern.context")

#: The model's name, part of every key (another model or size, other vectors).
MODEL = "wordllama-l2_supercat"
#: The model's vectors are cut to their first this many dimensions and made unit length
#: again (the model was trained so that its leading dimensions carry the most, the
#: "Matryoshka" way): at 10,000 files (150,000 chunks) 256 dimensions held in memory
#: took the process past its 300 MB budget; see docs/context.md for what 64 costs.
DIMENSIONS = 64
DIMENSIONS_ENV = "ASSERN_CONTEXT_EMBED_DIMS"
#: Texts per call of the model: its padded batch of token vectors is the largest
#: temporary of the process (texts x tokens x 256 floats).
MODEL_BATCH = 16
#: Chunks embedded per batch (and per transaction).
EMBED_BATCH = 128
#: The longest text of one chunk that is embedded, in characters.
TEXT_LIMIT = 2000
TEXT_LIMIT_ENV = "ASSERN_CONTEXT_EMBED_CHARS"
#: Seconds between looks at whether the index changed (`Store.writes`).
POLL_S = 0.25


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> Floats:
        """One unit-length float32 row per text."""
        ...


def semantic_installed() -> bool:
    """Whether the `assern[semantic]` extra is installed."""
    from assern.actors.search.semantic import installed

    return installed()


def load_embedder() -> Embedder:
    """The extra's model, from its wheel (never downloaded)."""
    from assern.actors.search.semantic import Embedder as WordLlamaEmbedder

    keep_heap_small()
    return WordLlamaEmbedder()


#: glibc's mallopt parameter for the size from which blocks are mapped on their own.
_M_MMAP_THRESHOLD = -3
#: Blocks this large and larger are given back to the system as soon as they are freed.
MMAP_THRESHOLD = 128 * 1024


def keep_heap_small() -> bool:
    """Fix glibc's mmap threshold (whether it took).

    The model's batches are large temporaries of varying size; glibc raises its mmap
    threshold each time such a block is freed, so later ones come from the heap and stay
    in the process's resident memory: over 150,000 chunks that was 60 MB and more of
    freed memory never returned. A fixed threshold gives every large block back when it
    is freed. Elsewhere than glibc this does nothing.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def embedded_text(path: str, symbol: str | None, text: str, limit: int = TEXT_LIMIT) -> str:
    """What is embedded of a chunk: its path and symbol in words, then its text."""
    head = " ".join(words(path)) + (" " + " ".join(words(symbol)) if symbol else "")
    return f"{head}\n{text}"[:limit]


def vector_key(text: str, dimensions: int = DIMENSIONS) -> bytes:
    """The cache key of an embedded text (the model's name and size, and the text)."""
    named = f"{MODEL}-{dimensions}\0{text}"
    return hashlib.blake2b(named.encode(errors="replace"), digest_size=16).digest()


def shortened(matrix: Floats, dimensions: int) -> Floats:
    """Each row cut to its first `dimensions` and made unit length again (a row of zeros,
    a text of no known token, stays zeros)."""
    import numpy as np

    cut = np.array(matrix[:, :dimensions], dtype=np.float32)
    np.nan_to_num(cut, copy=False)
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    np.divide(cut, norms, out=cut, where=norms > 0)
    return cut


# -- the database's side (each run under the store's lock: Store.run) --------------------


def _pending(db: sqlite3.Connection) -> list[tuple[int, int]]:
    """(chunk id, file id) of every chunk without a vector."""
    return db.execute(
        "SELECT id, file_id FROM chunks WHERE id NOT IN (SELECT chunk_id FROM chunk_vectors) ORDER BY id"
    ).fetchall()


def _rows(db: sqlite3.Connection, ids: Sequence[int]) -> list[tuple[int, str, str | None, str]]:
    """(chunk id, path, symbol, text) of those of `ids` still indexed."""
    return db.execute(
        "SELECT chunks.id, files.path, chunks.symbol, chunks.text FROM chunks "
        f"JOIN files ON files.id = chunks.file_id WHERE chunks.id IN ({', '.join('?' * len(ids))})",
        list(ids),
    ).fetchall()


def _stored(db: sqlite3.Connection, keys: Sequence[bytes]) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        found.update(
            db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({', '.join('?' * len(part))})", part
            ).fetchall()
        )
    return found


def _save(
    db: sqlite3.Connection,
    new: Sequence[tuple[bytes, bytes]],
    chunks: Sequence[tuple[int, str, str | None, str, bytes]],
) -> list[tuple[int, bytes]]:
    """Store the new vectors and each chunk's key, in one transaction; a chunk changed
    or deleted since it was read gets no key (it is pending again, or gone). The
    (chunk id, key) pairs written."""
    written = []
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany("INSERT OR IGNORE INTO vectors (key, vector) VALUES (?, ?)", new)
        for chunk_id, path, symbol, text, key in chunks:
            cursor = db.execute(
                "INSERT OR REPLACE INTO chunk_vectors (chunk_id, key) SELECT chunks.id, ? FROM chunks "
                "JOIN files ON files.id = chunks.file_id WHERE chunks.id = ? AND files.path = ? "
                "AND chunks.symbol IS ? AND chunks.text = ?",
                (key, chunk_id, path, symbol, text),
            )
            if cursor.rowcount:
                written.append((chunk_id, key))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return written


def _mapping(db: sqlite3.Connection) -> dict[int, bytes]:
    return dict(db.execute("SELECT chunk_id, key FROM chunk_vectors").fetchall())


def _prune(db: sqlite3.Connection) -> int:
    """Drop the vectors no chunk uses once they outnumber those in use (the cache keeps
    what a checkout back may want, within twice the index)."""
    used = db.execute("SELECT count(DISTINCT key) FROM chunk_vectors").fetchone()[0]
    stored = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    if stored <= 2 * used + 1000:
        return 0
    return db.execute("DELETE FROM vectors WHERE key NOT IN (SELECT key FROM chunk_vectors)").rowcount


# -- in memory ---------------------------------------------------------------------------


class Matrix:
    """The vectors of the indexed chunks, one row each, searched by a matrix product.

    Rows are reused: a dropped chunk frees its row for the next. Thread-safe (one lock).
    """

    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        import numpy as np

        self._np = np
        self._lock = threading.Lock()
        self._dimensions = dimensions
        self._vectors: Any = np.zeros((0, dimensions), dtype=np.float32)
        self._ids: Any = np.zeros(0, dtype=np.int64)  # -1 for a free row
        self._used = 0
        self._row: dict[int, int] = {}
        self._key: dict[int, bytes] = {}
        self._free: list[int] = []

    def __len__(self) -> int:
        return len(self._row)

    def keys(self) -> dict[int, bytes]:
        with self._lock:
            return dict(self._key)

    def put(self, items: Sequence[tuple[int, bytes, bytes]]) -> None:
        """Set each (chunk id, key, float32 vector as bytes)."""
        np = self._np
        with self._lock:
            for chunk_id, key, vector in items:
                row = self._row.get(chunk_id)
                if row is None:
                    row = self._free.pop() if self._free else self._append()
                    self._row[chunk_id] = row
                    self._ids[row] = chunk_id
                self._vectors[row] = np.frombuffer(vector, dtype=np.float32)
                self._key[chunk_id] = key

    def _append(self) -> int:
        np = self._np
        if self._used == len(self._ids):
            capacity = max(1024, math.ceil(self._used * 1.5))
            vectors = np.zeros((capacity, self._dimensions), dtype=np.float32)
            vectors[: self._used] = self._vectors[: self._used]
            ids = np.full(capacity, -1, dtype=np.int64)
            ids[: self._used] = self._ids[: self._used]
            self._vectors, self._ids = vectors, ids
        self._used += 1
        return self._used - 1

    def drop(self, ids: Sequence[int]) -> None:
        with self._lock:
            for chunk_id in ids:
                row = self._row.pop(chunk_id, None)
                if row is not None:
                    del self._key[chunk_id]
                    self._ids[row] = -1
                    self._vectors[row] = 0.0
                    self._free.append(row)

    def nearest(self, vector: Floats, limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the `limit` rows nearest `vector`, nearest first."""
        np = self._np
        with self._lock:
            if not self._row:
                return []
            similarity = self._vectors[: self._used] @ vector
            similarity[self._ids[: self._used] < 0] = -np.inf
            count = min(limit, len(self._row))
            best = np.argpartition(-similarity, count - 1)[:count]
            best = best[np.argsort(-similarity[best], kind="stable")]
            return [(int(self._ids[row]), float(similarity[row])) for row in best]


class Vectorizer:
    """One root's vectors: computes the missing ones and finds a question's nearest chunks.

    Args:
        store: The root's database.
        embedder: Makes the model (called once, at the first need).
    """

    def __init__(
        self,
        store: Store,
        embedder: Callable[[], Embedder] = load_embedder,
        *,
        text_limit: int | None = None,
        dimensions: int | None = None,
    ) -> None:
        self.store = store
        #: characters of each chunk embedded, and dimensions kept of each vector
        #: (ASSERN_CONTEXT_EMBED_CHARS and ASSERN_CONTEXT_EMBED_DIMS, for measuring)
        self.text_limit = text_limit or int(os.environ.get(TEXT_LIMIT_ENV) or TEXT_LIMIT)
        self.dimensions = dimensions or int(os.environ.get(DIMENSIONS_ENV) or DIMENSIONS)
        self.matrix = Matrix(self.dimensions)
        self._make = embedder
        self._embedder: Embedder | None = None
        self._make_lock = threading.Lock()
        #: texts given to the model so far (tests count them)
        self.embedded = 0
        #: files whose chunks wait for their vectors, as of the last look
        self._pending_files = 0
        #: the `Store.writes` the vectors are known current with (None: never looked)
        self._current_with: int | None = None
        self._loaded = False

    @property
    def embedder(self) -> Embedder:
        with self._make_lock:
            if self._embedder is None:
                self._embedder = self._make()
            return self._embedder

    @property
    def pending_files(self) -> int:
        """Files whose chunks wait for vectors: at least 1 until the vectors are known
        current with the index's last change."""
        if self._current_with != self.store.writes:
            return max(self._pending_files, 1)
        return self._pending_files

    @property
    def current(self) -> bool:
        return self._current_with == self.store.writes and self._pending_files == 0

    def catch_up(self, *, cancelled: Callable[[], bool] = lambda: False) -> int:
        """Give every chunk without a vector its vector (blocking); how many texts were
        embedded. Then the vectors in memory are brought in step with the database."""
        seen = self.store.writes
        if not self._loaded:
            self.sync()
            self._loaded = True
        pending = self.store.run(_pending)
        self._pending_files = len({file_id for _, file_id in pending})
        embedded = 0
        started = time.monotonic()
        for start in range(0, len(pending), EMBED_BATCH):
            if cancelled():
                return embedded
            batch = pending[start : start + EMBED_BATCH]
            embedded += self._batch([chunk_id for chunk_id, _ in batch])
            self._pending_files = len({file_id for _, file_id in pending[start + EMBED_BATCH :]})
        self.sync()
        if len(pending) > 0:
            log.info(
                "context vectors complete",
                chunks=len(pending),
                embedded=embedded,
                seconds=round(time.monotonic() - started, 3),
            )
        self.store.run(_prune)
        self._current_with = seen
        return embedded

    def _batch(self, ids: Sequence[int]) -> int:
        import numpy as np

        rows = self.store.run(lambda db: _rows(db, ids))
        chunks = []
        for chunk_id, path, symbol, text in rows:
            key = vector_key(embedded_text(path, symbol, text, self.text_limit), self.dimensions)
            chunks.append((chunk_id, path, symbol, text, key))
        keys = list({chunk[4] for chunk in chunks})
        known = self.store.run(lambda db: _stored(db, keys))
        missing: dict[bytes, str] = {}
        for _, path, symbol, text, key in chunks:
            if key not in known:
                missing[key] = embedded_text(path, symbol, text, self.text_limit)
        new: list[tuple[bytes, bytes]] = []
        if missing:
            texts = list(missing.values())
            matrix = np.concatenate(
                [
                    shortened(self.embedder.embed(texts[start : start + MODEL_BATCH]), self.dimensions)
                    for start in range(0, len(texts), MODEL_BATCH)
                ]
            )
            self.embedded += len(missing)
            new = [(key, matrix[row].tobytes()) for row, key in enumerate(missing)]
            known.update(new)
        written = self.store.run(lambda db: _save(db, new, chunks))
        self.matrix.put([(chunk_id, key, known[key]) for chunk_id, key in written])
        return len(missing)

    def sync(self) -> None:
        """Bring the vectors in memory in step with the database's (chunks deleted or
        re-indexed since leave; vectors written meanwhile come)."""
        stored = self.store.run(_mapping)
        held = self.matrix.keys()
        self.matrix.drop([chunk_id for chunk_id, key in held.items() if stored.get(chunk_id) != key])
        wanted = [(chunk_id, key) for chunk_id, key in stored.items() if held.get(chunk_id) != key]
        for start in range(0, len(wanted), 5000):
            part = wanted[start : start + 5000]
            keys = list({key for _, key in part})
            vectors = self.store.run(functools.partial(_stored, keys=keys))
            self.matrix.put([(chunk_id, key, vectors[key]) for chunk_id, key in part if key in vectors])

    def nearest(self, question: str, limit: int) -> list[tuple[int, float]]:
        """(chunk id, similarity) of the chunks nearest the question's meaning."""
        if not len(self.matrix):
            return []
        vector = shortened(self.embedder.embed([question]), self.dimensions)[0]
        return self.matrix.nearest(vector, limit)

    def fetch(self, path_glob: str | None) -> Callable[[list[int]], list[Hit]]:
        return lambda ids: self.store.chunks(ids, path_glob=path_glob)

    async def keep(self, ready: Callable[[], bool]) -> None:
        """Keep the vectors current for ever: once `ready()` (the first lexical index is
        complete), and again each time the index changes."""
        while not ready():  # noqa: ASYNC110 - the indexer sets a plain flag
            await trio.sleep(POLL_S)
        await trio.to_thread.run_sync(lambda: self.embedder)  # the model, off the loop
        while True:
            if self._current_with != self.store.writes or not self._loaded:
                stop = threading.Event()
                try:
                    await trio.to_thread.run_sync(
                        functools.partial(self.catch_up, cancelled=stop.is_set), abandon_on_cancel=True
                    )
                finally:
                    stop.set()  # cancelled: the thread stops after its batch
            await trio.sleep(POLL_S)
