"""The meaning of each chunk: vectors computed in the background, cached by content hash.

With the `assern[semantic]` extra installed, the context server ranks by meaning as well
as by words (fusion.py). The model is the extra's (WordLlama's `l2_supercat`, loaded
from its wheel with downloads disabled, its token vectors cut to the `DIMENSIONS` kept).

What is embedded of a chunk is `embedded_text`: its path and symbol in words, then its
text, cut at `TEXT_LIMIT` characters. Its key is a hash of the model's name and that
text (`vector_key`), so a chunk whose text did not change is never embedded again: not
after an edit elsewhere in its file, a rename back, a `git checkout` there and back, nor
a restart. Two tables of the root's database (store.py) hold them: `chunk_vectors`
(chunk id → key and float32 vector) and `vectors` (key → vector, for the keys no chunk
holds any more: a trigger moves a deleted chunk's vector there, and a chunk whose text
comes back takes it from there).

`Vectorizer` does the work, blocking (the server runs it in a worker thread). At the
start it reads every vector the database holds in one scan of `chunk_vectors`, on a
connection of its own (`Store.read_apart`), into one float32 array and one int64 array
of chunk ids (`Matrix`: no Python object per chunk), with the chunks that have none,
while the model loads; the index's answers never wait for it. Then it embeds the chunks
without a vector in batches of `EMBED_BATCH` (reusing every vector its key already has,
each batch written in one transaction), from the first batch of a first index on (the
server nudges it after each), and from then on only what the index changed: the store
keeps the ids of the chunks each batch of files wrote and deleted
(`Store.take_chunk_changes`), so a saved file costs work in proportion to that file. A
question's nearest chunks are found by one matrix product. Until a chunk has its vector
it is found by its words only; `pending_files` says how many files still wait, and
`state` what people see of it (`assernctl context status`).
"""

from __future__ import annotations

import array
import functools
import hashlib
import itertools
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

from assern.actors.search.text import words

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Mapping, Sequence

    import numpy as np
    import numpy.typing as npt

    from assern.context.store import Hit, Store

    Floats = npt.NDArray[np.float32]
    Ints = npt.NDArray[np.int64]

log = structlog.get_logger("assern.context")

#: The model's name, part of every key (another model or size, other vectors).
MODEL = "wordllama-l2_supercat"
#: The model's vectors are cut to their first this many dimensions and made unit length
#: again (the model was trained so that its leading dimensions carry the most, the
#: "Matryoshka" way): at 10,000 files (150,000 chunks) 256 dimensions held in memory
#: took the process past its 300 MB budget; see docs/context.md for what 64 costs.
DIMENSIONS = 64
DIMENSIONS_ENV = "ASSERN_CONTEXT_EMBED_DIMS"
#: Texts per call of the model: their token vectors are the largest temporary of the
#: process (tokens x dimensions floats, about 2 MB for 32 chunks).
MODEL_BATCH = 32
#: Chunks embedded per batch (and per transaction).
EMBED_BATCH = 128
#: The longest text of one chunk that is embedded, in characters.
TEXT_LIMIT = 2000
TEXT_LIMIT_ENV = "ASSERN_CONTEXT_EMBED_CHARS"
#: Seconds between looks at whether the index changed (`Store.writes`).
POLL_S = 0.25
#: Seconds between two publications of the vectors' progress while they are computed.
PUBLISH_S = 2.0

#: What `Vectorizer.state` says (`state` of the published `vectors`): `loading` (the
#: vectors the database holds are being read), `embedding` (chunks without a vector are
#: being embedded: those are ranked by their words alone meanwhile), `current` (every
#: chunk indexed so far has its vector).
STATES = ("loading", "embedding", "current")


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> Floats:
        """One unit-length float32 row per text."""
        ...


def semantic_installed() -> bool:
    """Whether the `assern[semantic]` extra is installed."""
    from assern.actors.search.semantic import installed

    return installed()


class WordLlamaEmbedder:
    """The extra's model, from the files its wheel installed (never downloaded), its token
    vectors cut to `dimensions` as it loads: a text's vector is the mean of its tokens'
    vectors, so this gives the same vectors as cutting the full ones after pooling (to
    float precision), with a quarter of the table and of each batch's temporaries.

    The mean is taken here rather than by the model's `embed`, which pads every text of a
    batch to the longest one's tokens and averages the padded block under a mask: the
    tokens of a batch are gathered once, unpadded, and summed per text (the same vectors
    to 10⁻⁶, a fifth less CPU on chunks of code, whose lengths vary).

    Raises:
        ImportError: the extra is not installed.
        FileNotFoundError: the wheel lacks its model files.
    """

    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        from pathlib import Path

        import numpy as np
        import wordllama
        from wordllama import WordLlama

        folder = Path(wordllama.__file__).parent
        self._model = WordLlama.load(
            cache_dir=folder, disable_download=True, trunc_dim=dimensions if dimensions < 256 else None
        )
        self._table: Floats = np.ascontiguousarray(self._model.embedding, dtype=np.float32)
        self._tokenizer = self._model.tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        # The tokenizer has no pre-tokenizer, so its BPE cache keeps each whole text it
        # saw (under 256 characters; about 5 KB each): 150,000 chunks took the process
        # 180 MB further. A chunk is embedded once (its vector is cached by key), so the
        # cache only costs.
        self.tokenizer_cache = disable_tokenizer_cache(self._tokenizer)

    def embed(self, texts: Sequence[str]) -> Floats:
        import numpy as np

        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        lengths = np.fromiter((len(encoding.ids) for encoding in encodings), np.int64, len(encodings))
        every = itertools.chain.from_iterable(encoding.ids for encoding in encodings)
        tokens = np.fromiter(every, np.int64, int(lengths.sum()))
        np.clip(tokens, 0, len(self._table) - 1, out=tokens)
        sums = np.zeros((len(encodings), self._table.shape[1]), dtype=np.float32)
        some = lengths > 0
        if some.any():
            starts = np.cumsum(lengths) - lengths
            sums[some] = np.add.reduceat(self._table[tokens], starts[some], axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        np.divide(sums, norms, out=sums, where=norms > 0)
        return sums


def disable_tokenizer_cache(tokenizer: Any) -> bool:
    """Switch off the BPE model's cache of whole words (here: whole texts) in a `tokenizers`
    tokenizer; whether it could (a tokenizer without that cache has nothing to switch)."""
    resize_cache = getattr(getattr(tokenizer, "model", None), "_resize_cache", None)
    if resize_cache is None:
        return False
    resize_cache(0)
    return True


def load_embedder(dimensions: int = DIMENSIONS) -> Embedder:
    """The extra's model, from its wheel (never downloaded), for `dimensions`."""
    keep_heap_small()
    return WordLlamaEmbedder(dimensions)


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


def files_left(file_ids: Ints) -> Ints:
    """For each position i of `file_ids`, how many distinct files `file_ids[i:]` holds
    (one more entry at the end: 0)."""
    import numpy as np

    count = len(file_ids)
    last = np.zeros(count + 1, dtype=np.int64)
    if count:
        # the last occurrence of each file counts for every position up to it
        _, first_from_end = np.unique(file_ids[::-1], return_index=True)
        last[count - 1 - first_from_end] = 1
    return np.cumsum(last[::-1])[::-1]


# -- the database's side ----------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _numpy() -> Any:
    import numpy

    return numpy


def _load(db: sqlite3.Connection, dimensions: int) -> tuple[Ints, Floats, Ints, Ints]:
    """Every chunk's vector, in one scan of `chunk_vectors` (one snapshot, `Store.read_apart`):
    (chunk ids, their vectors), the arrays sized for every chunk so that the vectors still
    to come fit in them; and (chunk id, file id) of the chunks without a vector of this
    size, in id order (the chunks are read only when some have none)."""
    np = _numpy()
    total = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    size = dimensions * 4
    ids = np.full(total, -1, dtype=np.int64)
    vectors = np.empty((total, dimensions), dtype=np.float32)
    flat = memoryview(vectors.reshape(-1).view(np.uint8))
    held = 0
    for chunk_id, vector in db.execute("SELECT chunk_id, vector FROM chunk_vectors"):
        if len(vector) == size and held < total:
            ids[held] = chunk_id
            flat[held * size : (held + 1) * size] = vector
            held += 1
    if held == total:
        empty = np.zeros(0, dtype=np.int64)
        return ids, vectors, empty, empty.copy()
    pairs = array.array("q")
    for chunk_id, file_id in db.execute("SELECT id, file_id FROM chunks"):
        pairs.append(chunk_id)
        pairs.append(file_id)
    every = np.frombuffer(pairs, dtype=np.int64).reshape(-1, 2)
    every = every[np.argsort(every[:, 0], kind="stable")]
    without = every[~np.isin(every[:, 0], ids[:held])]
    return ids, vectors, without[:, 0].copy(), without[:, 1].copy()


def _rows(db: sqlite3.Connection, ids: Sequence[int]) -> list[tuple[int, str, str | None, str]]:
    """(chunk id, path, symbol, text) of those of `ids` still indexed."""
    return db.execute(
        "SELECT chunks.id, files.path, chunks.symbol, chunks.text FROM chunks "
        f"JOIN files ON files.id = chunks.file_id WHERE chunks.id IN ({', '.join('?' * len(ids))})",
        list(ids),
    ).fetchall()


def _stored(db: sqlite3.Connection, keys: Sequence[bytes]) -> dict[bytes, bytes]:
    """The vectors the cache (`vectors`: keys no chunk holds any more) has of `keys`."""
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
    vectors: Mapping[bytes, bytes],
    chunks: Sequence[tuple[int, str, str | None, str, bytes]],
    cached: Sequence[bytes] = (),
) -> list[tuple[int, bytes]]:
    """Store each chunk's vector beside it (`vectors` by key) and take the `cached` keys
    out of the cache (a chunk holds them again), in one transaction; a chunk changed or
    deleted since it was read gets no vector (it is pending again, or gone). The
    (chunk id, key) pairs written."""
    written = []
    db.execute("BEGIN IMMEDIATE")
    try:
        for chunk_id, path, symbol, text, key in chunks:
            cursor = db.execute(
                "INSERT OR REPLACE INTO chunk_vectors (chunk_id, key, vector) SELECT chunks.id, ?, ? "
                "FROM chunks JOIN files ON files.id = chunks.file_id WHERE chunks.id = ? AND files.path = ? "
                "AND chunks.symbol IS ? AND chunks.text = ?",
                (key, vectors[key], chunk_id, path, symbol, text),
            )
            if cursor.rowcount:
                written.append((chunk_id, key))
        if cached:
            db.executemany("DELETE FROM vectors WHERE key = ?", [(key,) for key in cached])
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return written


def _prune(db: sqlite3.Connection) -> int:
    """Drop the oldest vectors of the cache (keys no chunk holds) once they outnumber the
    chunks' by more than 1,000, keeping as many as the chunks have (what a checkout
    back may want, within twice the index)."""
    used = db.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
    stored = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    if stored <= used + 1000:
        return 0
    return db.execute(
        "DELETE FROM vectors WHERE id NOT IN (SELECT id FROM vectors ORDER BY id DESC LIMIT ?)", (used,)
    ).rowcount


# -- in memory ---------------------------------------------------------------------------


class Matrix:
    """The vectors of the indexed chunks, one float32 row each, and each row's chunk id
    (an int64 array; -1 for a free row): no Python object per chunk. A question's nearest
    chunks are one matrix product. Rows are reused: a dropped chunk frees its row for the
    next. Thread-safe (one lock, held for a product or a change, never for a read of the
    database)."""

    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        np = _numpy()
        self._lock = threading.Lock()
        self.dimensions = dimensions
        self._vectors: Floats = np.zeros((0, dimensions), dtype=np.float32)
        self._ids: Ints = np.zeros(0, dtype=np.int64)
        #: rows in use or freed (those after it were never used)
        self._used = 0
        #: rows holding a chunk's vector
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def ids(self) -> set[int]:
        """The chunk ids held (for tests and checks: a Python object each)."""
        with self._lock:
            return {int(chunk_id) for chunk_id in self._ids[: self._used] if chunk_id >= 0}

    def load(self, ids: Ints, vectors: Floats, count: int) -> None:
        """Hold these arrays instead (their first `count` rows are chunks' vectors; the
        rows after them are room for more)."""
        with self._lock:
            self._ids, self._vectors = ids, vectors
            self._ids[count:] = -1
            self._used = self._count = count

    def clear(self) -> None:
        np = _numpy()
        with self._lock:
            self._vectors = np.zeros((0, self.dimensions), dtype=np.float32)
            self._ids = np.zeros(0, dtype=np.int64)
            self._used = self._count = 0

    def reserve(self, rows: int) -> None:
        """Make room for `rows` more chunks at once (one copy, not one per growth)."""
        with self._lock:
            self._grow(self._count + rows - (self._used - self._count))

    def _grow(self, needed: int) -> None:
        np = _numpy()
        if needed <= len(self._ids):
            return
        vectors = np.zeros((needed, self.dimensions), dtype=np.float32)
        vectors[: self._used] = self._vectors[: self._used]
        ids = np.full(needed, -1, dtype=np.int64)
        ids[: self._used] = self._ids[: self._used]
        self._vectors, self._ids = vectors, ids

    def put(self, ids: Sequence[int], vectors: Floats) -> None:
        """Hold `vectors` (one row each) for chunks `ids`, none of which is held (a chunk
        whose vector changes is dropped first: `drop`)."""
        np = _numpy()
        if not len(ids):
            return
        with self._lock:
            free = np.flatnonzero(self._ids[: self._used] < 0) if self._used > self._count else None
            reused = free[: len(ids)] if free is not None else np.zeros(0, dtype=np.int64)
            fresh = len(ids) - len(reused)
            if self._used + fresh > len(self._ids):
                self._grow(max(1024, self._used + fresh, (self._used * 3) // 2))
            rows = np.concatenate([reused, np.arange(self._used, self._used + fresh, dtype=np.int64)])
            self._ids[rows] = np.asarray(ids, dtype=np.int64)
            self._vectors[rows] = vectors
            self._used += fresh
            self._count += len(ids)

    def drop(self, ids: Sequence[int]) -> int:
        """Forget the vectors of `ids` (those held); how many were."""
        np = _numpy()
        if not len(ids) or not self._count:
            return 0
        with self._lock:
            rows = np.flatnonzero(np.isin(self._ids[: self._used], np.asarray(ids, dtype=np.int64)))
            self._ids[rows] = -1
            self._vectors[rows] = 0.0
            self._count -= len(rows)
            return len(rows)

    def nearest(self, vector: Floats, limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the `limit` rows nearest `vector`, nearest first."""
        np = _numpy()
        with self._lock:
            if not self._count or limit < 1:
                return []
            similarity = self._vectors[: self._used] @ vector
            if self._used > self._count:
                similarity[self._ids[: self._used] < 0] = -np.inf
            count = min(limit, self._count)
            edge = len(similarity) - count
            best = np.argpartition(similarity, edge)[edge:]
            best = best[np.argsort(-similarity[best], kind="stable")]
            return [(int(self._ids[row]), float(similarity[row])) for row in best]


class Vectorizer:
    """One root's vectors: computes the missing ones and finds a question's nearest chunks.

    Args:
        store: The root's database.
        embedder: Makes the model for a number of dimensions (called once, at the first
            need).
        publish: Called with the vectors' state (`state_doc`) as it changes, from the
            thread doing the work (the server writes it to the state table).
    """

    def __init__(
        self,
        store: Store,
        embedder: Callable[[int], Embedder] = load_embedder,
        *,
        text_limit: int | None = None,
        dimensions: int | None = None,
        publish: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        np = _numpy()
        self.store = store
        #: characters of each chunk embedded, and dimensions kept of each vector
        #: (ASSERN_CONTEXT_EMBED_CHARS and ASSERN_CONTEXT_EMBED_DIMS, for measuring)
        self.text_limit = text_limit or int(os.environ.get(TEXT_LIMIT_ENV) or TEXT_LIMIT)
        self.dimensions = dimensions or int(os.environ.get(DIMENSIONS_ENV) or DIMENSIONS)
        self.matrix = Matrix(self.dimensions)
        self._make = embedder
        self._embedder: Embedder | None = None
        self._make_lock = threading.Lock()
        self._publish = publish
        #: one catch-up at a time
        self._work_lock = threading.Lock()
        #: texts given to the model so far, chunk rows read to embed them, and full
        #: loads of the vectors (tests count them)
        self.embedded = 0
        self.rows_read = 0
        self.loads = 0
        #: the store's generation the vectors in memory are of (None: not read yet)
        self._generation: int | None = None
        #: the chunks without a vector, in id order, from `_next` on: their ids, their
        #: files' ids, and how many distinct files each position leaves (`files_left`)
        self._waiting: Ints = np.zeros(0, dtype=np.int64)
        self._waiting_files: Ints = np.zeros(0, dtype=np.int64)
        self._files_left: Ints = np.zeros(1, dtype=np.int64)
        self._next = 0
        #: the `Store.writes` the vectors are known current with (None: never looked)
        self._current_with: int | None = None
        self.state = "loading"
        self._published_at = 0.0
        #: set when the index changed (`nudge`), to look at once
        self._nudged = trio.Event()

    @property
    def embedder(self) -> Embedder:
        with self._make_lock:
            if self._embedder is None:
                self._embedder = self._make(self.dimensions)
            return self._embedder

    @property
    def waiting_chunks(self) -> int:
        return len(self._waiting) - self._next

    @property
    def pending_files(self) -> int:
        """Files whose chunks wait for vectors: at least 1 until the vectors are known
        current with the index's last change."""
        left = int(self._files_left[min(self._next, len(self._files_left) - 1)])
        if self._current_with != self.store.writes:
            return max(left, 1)
        return left

    @property
    def current(self) -> bool:
        return self._current_with == self.store.writes and self.waiting_chunks == 0

    def state_doc(self) -> dict[str, Any]:
        """What people see of the vectors (the `vectors` value of the state table)."""
        return {
            "state": self.state,
            "chunks": len(self.matrix),
            "pending_chunks": self.waiting_chunks,
            "pending_files": int(self._files_left[min(self._next, len(self._files_left) - 1)]),
            "dimensions": self.dimensions,
        }

    def _tell(self, state: str | None = None, *, force: bool = True) -> None:
        if state is not None:
            force = force or state != self.state
            self.state = state
        now = time.monotonic()
        if self._publish is None or not (force or now - self._published_at >= PUBLISH_S):
            return
        self._published_at = now
        self._publish(self.state_doc())

    # -- the work (blocking) -----------------------------------------------------------

    def load(self) -> None:
        """Read every vector the database holds into memory (one pass, on a connection of
        its own), and which chunks have none. From here on the store keeps the chunks
        each batch changes (`Store.track_chunks`), so later looks read only those."""
        with self._work_lock:
            self._load()

    def _load(self) -> None:
        np = _numpy()
        started = time.monotonic()
        self.state = "loading"
        self.store.track_chunks()
        self.store.take_chunk_changes()  # what the snapshot below already holds
        generation = self.store.generation
        ids, vectors, waiting, waiting_files = self.store.read_apart(
            functools.partial(_load, dimensions=self.dimensions)
        )
        held = int(np.count_nonzero(ids >= 0))
        self.matrix.load(ids, vectors, held)
        self._set_waiting(waiting, waiting_files)
        self._generation = generation
        self.loads += 1
        log.info(
            "context vectors loaded",
            chunks=held,
            pending=len(waiting),
            seconds=round(time.monotonic() - started, 3),
        )

    def _set_waiting(self, ids: Ints, file_ids: Ints) -> None:
        self._waiting, self._waiting_files, self._next = ids, file_ids, 0
        self._files_left = files_left(file_ids)

    def _take(self) -> None:
        """Bring the vectors in memory and the list of chunks without one in step with
        what the index's batches changed since the last look (only those chunks)."""
        np = _numpy()
        added, removed = self.store.take_chunk_changes()
        if not added and not removed:
            return
        ids = self._waiting[self._next :]
        file_ids = self._waiting_files[self._next :]
        if removed:
            gone = np.asarray(removed, dtype=np.int64)
            self.matrix.drop(removed)
            keep = ~np.isin(ids, gone)
            ids, file_ids = ids[keep], file_ids[keep]
        if added:
            new = np.asarray(added, dtype=np.int64).reshape(-1, 2)
            ids = np.concatenate([ids, new[:, 0]])
            file_ids = np.concatenate([file_ids, new[:, 1]])
            # in id order, each chunk once (an id can come back: SQLite reuses them)
            ids, first = np.unique(ids, return_index=True)
            file_ids = file_ids[first]
        self._set_waiting(ids, file_ids)

    def catch_up(self, *, cancelled: Callable[[], bool] = lambda: False) -> int:
        """Give every chunk without a vector its vector (blocking); how many texts were
        embedded. The vectors in memory follow: read whole the first time (and after the
        database was rebuilt), else only the chunks the index changed since."""
        with self._work_lock:
            seen = self.store.writes
            if self._generation != self.store.generation:
                self.matrix.clear()
                self._load()
            else:
                self._take()
            total = self.waiting_chunks
            embedded = 0
            started = time.monotonic()
            if total:
                self.matrix.reserve(total)
                self._tell("embedding")
            while self._next < len(self._waiting):
                if cancelled():
                    return embedded
                batch = self._waiting[self._next : self._next + EMBED_BATCH]
                embedded += self._batch([int(chunk_id) for chunk_id in batch])
                self._next += len(batch)
                self._tell(force=False)
            if embedded:
                self.store.run(_prune)
            if total:
                log.info(
                    "context vectors complete",
                    chunks=total,
                    embedded=embedded,
                    seconds=round(time.monotonic() - started, 3),
                )
            self._current_with = seen
            self._tell("current", force=bool(total) or self.state != "current")
            return embedded

    def _batch(self, ids: Sequence[int]) -> int:
        np = _numpy()
        rows = self.store.run(lambda db: _rows(db, ids))
        self.rows_read += len(rows)
        chunks = []
        for chunk_id, path, symbol, text in rows:
            key = vector_key(embedded_text(path, symbol, text, self.text_limit), self.dimensions)
            chunks.append((chunk_id, path, symbol, text, key))
        keys = list({chunk[4] for chunk in chunks})
        known = self.store.run(lambda db: _stored(db, keys))
        cached = list(known)
        missing: dict[bytes, str] = {}
        for _, path, symbol, text, key in chunks:
            if key not in known:
                missing[key] = embedded_text(path, symbol, text, self.text_limit)
        if missing:
            texts = list(missing.values())
            matrix = np.concatenate(
                [
                    shortened(self.embedder.embed(texts[start : start + MODEL_BATCH]), self.dimensions)
                    for start in range(0, len(texts), MODEL_BATCH)
                ]
            )
            self.embedded += len(missing)
            known.update((key, matrix[row].tobytes()) for row, key in enumerate(missing))
        written = self.store.run(lambda db: _save(db, known, chunks, cached))
        if written:
            vectors = np.frombuffer(b"".join(known[key] for _, key in written), dtype=np.float32)
            self.matrix.put([chunk_id for chunk_id, _ in written], vectors.reshape(len(written), -1))
        return len(missing)

    # -- the questions (any thread) ----------------------------------------------------

    def nearest(self, question: str, limit: int) -> list[tuple[int, float]]:
        """(chunk id, similarity) of the chunks nearest the question's meaning; none while
        the model is not loaded yet (the answer is lexical meanwhile, never held up)."""
        embedder = self._embedder
        if embedder is None or not len(self.matrix):
            return []
        vector = shortened(embedder.embed([question]), self.dimensions)[0]
        return self.matrix.nearest(vector, limit)

    def fetch(self, path_glob: str | None) -> Callable[[list[int]], list[Hit]]:
        return lambda ids: self.store.chunks(ids, path_glob=path_glob)

    def nudge(self) -> None:
        """Wake `keep` now rather than at its next look: the index changed (trio's loop)."""
        self._nudged.set()

    async def keep(self) -> None:
        """Keep the vectors current for ever: read those the database holds while the model
        loads (a restart ranks by meaning as soon as both are in, by words meanwhile), then
        embed what has no vector, and again each time the index changes (`nudge`, or
        every `POLL_S`). A first index is embedded batch by batch as it is written: the
        tokenizer runs without the GIL, so on the core the indexer leaves."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(trio.to_thread.run_sync, lambda: self.embedder))
            await trio.to_thread.run_sync(self.load)
        while True:
            if self._current_with != self.store.writes or self._generation != self.store.generation:
                stop = threading.Event()
                try:
                    await trio.to_thread.run_sync(
                        functools.partial(self.catch_up, cancelled=stop.is_set), abandon_on_cancel=True
                    )
                finally:
                    stop.set()  # cancelled: the thread stops after its batch
            with trio.move_on_after(POLL_S):
                await self._nudged.wait()
            self._nudged = trio.Event()
