"""The index of one root: a SQLite database of files, chunks and their lexical index.

One database per root, at `$ASSERN_HOME/cache/context/<hash of the root>.sqlite3`
(`database_path`). The standard library's `sqlite3` in WAL mode: readers (the tools)
see the last committed batch while the indexer writes the next. Every batch of files is
one transaction, so a kill -9 in the middle of indexing loses at most that batch, and
the next start finds its files still changed and indexes them again.

Tables: `files` (path, size, mtime, content hash, whether it was indexed or refused
as binary or unreadable, and its path's terms), `chunks` (lines, kind, symbol, text and
its symbol's and body's terms, zlib-compressed) and `lexical`, a contentless FTS5 index
of each chunk's terms in three columns (symbol, path, body) ranked by SQLite's own BM25
(which picks the candidates of a query's rarer terms), then scored by BM25F over all its
terms (bm25.py) with running field-length sums kept in `totals`. The terms are computed
by terms.py, never by FTS5's tokenizer, so that questions and code meet on the same
stems and whole identifiers. `lexical` keeps no copy of the terms (`content = ''`): the
compressed copy in `chunks` is what BM25F reads and what a deletion hands back to FTS5
(a contentless table forgets a row given its rowid and its values); at 10,000 files this
halves what the terms take on disk. `chunk_vectors` holds each chunk's vector beside
its id when the ranking uses them, and `vectors` those no chunk holds any more, by key
(vectors.py; a trigger moves a chunk's vector there when the chunk is deleted).

A database that cannot be opened or read (corrupted, or written by another schema) is
moved aside and rebuilt; `Store.rebuilt` says so, for the log. One of a schema
`MIGRATIONS` knows is migrated in place instead (`Store.migrated`). A running server finds
out too: every use first checks that the file is still the one opened (deleted or
replaced under it, `StoreLost`), a read or write that fails raises `sqlite3.DatabaseError`,
and `check` runs SQLite's `quick_check` on a connection of its own (the server runs it
in the background after a start: it reads the whole file, 0.2 s at 10,000 files).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from assern.context.bm25 import Stats, idf, score
from assern.context.chunk import Chunk

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

T = TypeVar("T")

#: Bumped whenever the tables or the terms change: an older database is rebuilt, unless
#: `MIGRATIONS` knows how to bring it here.
SCHEMA_VERSION = "5"

#: Candidates come from the query's rarest terms, taken rarest first while the chunks
#: holding them add up to at most this many (always at least one term): FTS5 scores
#: every chunk a term matches, so a term found in a tenth of the tree would cost a
#: scan of a tenth of it. Every query term then counts in the BM25F score (bm25.py).
CANDIDATE_POSTINGS = 2500

#: vectors.py's tables: each chunk's vector beside its id and its key (a hash of what was
#: embedded), read at a start as one scan of one table; and `vectors`, the vectors of
#: keys no chunk holds any more (newest last), kept for a text that comes back. A chunk's
#: deletion moves its vector there (the trigger), in the transaction that deletes it.
_VECTORS = """
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY, key BLOB NOT NULL, vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS chunk_vectors_gone AFTER DELETE ON chunks BEGIN
    INSERT OR REPLACE INTO vectors (key, vector)
        SELECT key, vector FROM chunk_vectors WHERE chunk_id = old.id;
    DELETE FROM chunk_vectors WHERE chunk_id = old.id;
END;
"""

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash TEXT NOT NULL,
    status TEXT NOT NULL,
    terms TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    kind TEXT NOT NULL,
    symbol TEXT,
    text TEXT NOT NULL,
    terms BLOB NOT NULL DEFAULT x''
);
CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks (file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS lexical USING fts5 (symbol, path, body, content = '', detail = full);
CREATE VIRTUAL TABLE IF NOT EXISTS lexical_terms USING fts5vocab (lexical, 'row');
CREATE TABLE IF NOT EXISTS totals (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    chunks INTEGER NOT NULL,
    symbol INTEGER NOT NULL,
    path INTEGER NOT NULL,
    body INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals VALUES (1, 0, 0, 0, 0);
"""
#: Every table, index and trigger (made when missing).
_SCHEMA = _TABLES + _VECTORS


#: Schema 4 (each vector once per key in `vectors`, and chunk id → key in `chunk_vectors`,
#: read at a start through a join: three times slower) to 5, keeping every vector.
_MIGRATE_4 = (
    "DROP TRIGGER IF EXISTS chunk_vectors_gone",
    "CREATE TABLE chunk_vectors_5 (chunk_id INTEGER PRIMARY KEY, key BLOB NOT NULL, vector BLOB NOT NULL)",
    "INSERT INTO chunk_vectors_5 SELECT chunk_vectors.chunk_id, chunk_vectors.key, vectors.vector "
    "FROM chunk_vectors JOIN vectors ON vectors.key = chunk_vectors.key ORDER BY chunk_vectors.chunk_id",
    "CREATE TABLE vectors_5 (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL)",
    "INSERT INTO vectors_5 (key, vector) SELECT key, vector FROM vectors "
    "WHERE key NOT IN (SELECT key FROM chunk_vectors)",
    "DROP TABLE chunk_vectors",
    "DROP TABLE vectors",
    "ALTER TABLE chunk_vectors_5 RENAME TO chunk_vectors",
    "ALTER TABLE vectors_5 RENAME TO vectors",
)
#: The schemas an older database is migrated from (to `SCHEMA_VERSION`), in place.
MIGRATIONS = {"4": _MIGRATE_4}


#: How every SQLite database file starts.
_MAGIC = b"SQLite format 3\0"


def database_path(assern_home: Path, root: Path) -> Path:
    """Where the index of `root` lives: one file per resolved root."""
    digest = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]
    return assern_home / "cache" / "context" / f"{root.resolve().name[:40]}-{digest}.sqlite3"


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def pack_terms(symbol: str, body: str) -> bytes:
    """A chunk's symbol and body terms (space-joined, no newline in them), compressed."""
    return zlib.compress(f"{symbol}\n{body}".encode(), 1)


def unpack_terms(packed: bytes) -> tuple[str, str]:
    symbol, _, body = zlib.decompress(packed).decode().partition("\n")
    return symbol, body


@attrs.frozen(kw_only=True)
class Known:
    """What the database knows of one file."""

    size: int
    mtime_ns: int
    hash: str


@attrs.frozen(kw_only=True)
class FileUpdate:
    """One file to write: its stat, hash and status; `chunks` None keeps the old ones
    (the content did not change, only the mtime), else they replace them.

    `terms` holds each chunk's (symbol, path, body) terms, joined by spaces.
    """

    path: str
    size: int
    mtime_ns: int
    hash: str
    status: str = "indexed"
    chunks: Sequence[Chunk] | None = None
    terms: Sequence[tuple[str, str, str]] = ()


@attrs.frozen(kw_only=True)
class Hit:
    """One chunk the lexical index found, with its BM25 score (higher is better)."""

    chunk_id: int
    path: str
    start_line: int
    end_line: int
    kind: str
    symbol: str | None
    text: str
    score: float


@attrs.frozen(kw_only=True)
class Migration:
    """A database migrated in place when it was opened: from and to which schema, and
    how long it took."""

    old: str
    new: str
    seconds: float


class StoreLost(sqlite3.DatabaseError):
    """The database file is no longer the one opened: deleted, or replaced."""


class Store:
    """One root's database; safe to use from several threads (one lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rebuilt: str | None = None
        #: the migration made when the database was opened, if one was (for the log)
        self.migrated: Migration | None = None
        #: how many times the database was rebuilt under this store (a new empty one)
        self.generation = 0
        self._identity: tuple[int, int] | None = None
        #: the database file, open for reading its header (`_guard`) for as long as the
        #: connection is: closing a descriptor of the file would drop every POSIX lock
        #: this process holds on it, SQLite's included, so none is opened per check
        self._head: int | None = None
        #: (indexed files, chunks) as of the last write (every answer tells them)
        self._counts: tuple[int, int] | None = None
        self._counted = 0
        #: how many batches changed the chunks (vectors.py looks for new ones when it grows)
        self.writes = 0
        #: the chunks written and deleted since the last `take_chunk_changes` (committed
        #: batches only), kept once `track_chunks` was called (vectors.py): (chunk id,
        #: file id) of each chunk written, and the ids of those deleted
        self._added: list[tuple[int, int]] | None = None
        self._removed: list[int] | None = None
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            self.rebuilt = f"{type(exc).__name__}: {exc}"
            self._discard()
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            found = db.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone()
            if found is not None:
                version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if version is not None and version[0] in MIGRATIONS:
                    self._migrate(db, version[0])
                elif version is None or version[0] != SCHEMA_VERSION:
                    raise sqlite3.DatabaseError(
                        f"schema {version[0] if version else None}, not {SCHEMA_VERSION}"
                    )
            db.executescript(_SCHEMA)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            info = os.stat(self.path)
        except BaseException:
            db.close()
            raise
        self._identity = (info.st_dev, info.st_ino)
        self._head = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return db

    def _migrate(self, db: sqlite3.Connection, version: str) -> None:
        """Bring a database of schema `version` to `SCHEMA_VERSION` in one transaction
        (a kill -9 meanwhile leaves it as it was; the trigger is made by `_SCHEMA` right
        after, before any use); `migrated` says so, for the log."""
        started = time.monotonic()
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version]:
                db.execute(statement)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.migrated = Migration(
            old=version, new=SCHEMA_VERSION, seconds=round(time.monotonic() - started, 3)
        )

    def _close(self) -> None:
        """Close the connection, then the header's descriptor (no lock is held by then)."""
        self._db.close()
        if self._head is not None:
            os.close(self._head)
            self._head = None

    def _guard(self) -> None:
        """Raise `StoreLost` when the file at `path` is no longer the one opened (SQLite
        would go on reading and writing the deleted file) or no longer starts as a
        database does (overwritten: SQLite may answer from its cache for a while).
        Called under the lock; a stat, and a read of 16 bytes from the descriptor kept
        open for it (never an open and a close of the file: see `_head`)."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            raise StoreLost(f"the database file {self.path.name} was deleted") from None
        except OSError as exc:
            raise StoreLost(f"the database file {self.path.name} cannot be read: {exc.strerror}") from None
        if (info.st_dev, info.st_ino) != self._identity:
            raise StoreLost(f"the database file {self.path.name} was replaced")
        try:
            head = os.pread(self._head, len(_MAGIC), 0) if self._head is not None else _MAGIC
        except OSError as exc:
            raise StoreLost(f"the database file {self.path.name} cannot be read: {exc.strerror}") from None
        if head != _MAGIC and (head or info.st_size):
            raise StoreLost(f"the database file {self.path.name} was overwritten (not a SQLite database)")

    def check(self) -> str | None:
        """What is wrong with the database (SQLite's `quick_check`, on a connection of its
        own so that the others are not held up), or None."""
        with self._lock:
            self._guard()
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            try:
                found = db.execute("PRAGMA quick_check").fetchone()
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            return f"{type(exc).__name__}: {exc}"
        if found is None or found[0] != "ok":
            return f"quick_check: {found[0] if found else 'no answer'}"
        return None

    def _discard(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass

    def close(self) -> None:
        with self._lock:
            self._close()

    def rebuild(self, reason: str) -> None:
        """Throw the database away and start an empty one (it was found broken)."""
        with self._lock:
            self._close()
            self._discard()
            self.rebuilt = reason
            self.generation += 1
            self._counts = None
            if self._added is not None:  # a new, empty database: nothing changed in it yet
                self._added, self._removed = [], []
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._open()

    def run_write(self, work: Callable[[sqlite3.Connection], None]) -> None:
        """Run `work` on the database in one transaction (for the tables other modules
        keep in it, such as state.py's)."""
        with self._lock:
            self._guard()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                work(self._db)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def track_chunks(self) -> None:
        """Keep the chunks written and deleted from now on, for `take_chunk_changes`."""
        with self._lock:
            if self._added is None:
                self._added, self._removed = [], []

    def take_chunk_changes(self) -> tuple[list[tuple[int, int]], list[int]]:
        """The chunks written ((chunk id, file id) each) and deleted (ids) by the batches
        committed since the last call (or since `track_chunks`), in the order they were.

        A chunk id may be in both (SQLite reuses the highest ids of deleted rows): what
        the database holds now is what counts.
        """
        with self._lock:
            if self._added is None or self._removed is None:
                raise RuntimeError("track_chunks was not called")
            taken = self._added, self._removed
            self._added, self._removed = [], []
        return taken

    # -- the indexer's side -------------------------------------------------------------

    def known(self) -> dict[str, Known]:
        """Every file the database knows, by path."""
        with self._lock:
            self._guard()
            rows = self._db.execute("SELECT path, size, mtime_ns, hash FROM files").fetchall()
        return {path: Known(size=size, mtime_ns=mtime, hash=digest) for path, size, mtime, digest in rows}

    def write(self, updates: Iterable[FileUpdate], deleted: Iterable[str] = ()) -> None:
        """Write one batch in one transaction: all of it is committed, or none."""
        updates, deleted = list(updates), list(deleted)
        with self._lock:
            self._guard()
            db = self._db
            added: list[tuple[int, int]] = []
            removed: list[int] = []
            db.execute("BEGIN IMMEDIATE")
            try:
                for path in deleted:
                    self._delete(path, removed)
                self._counts = None
                for update in updates:
                    self._write_file(update, added, removed)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if self._added is not None and self._removed is not None:
                self._added += added
                self._removed += removed
            if deleted or any(update.chunks is not None for update in updates):
                self.writes += 1

    def _delete(self, path: str, removed: list[int]) -> None:
        """Delete the file at `path` and its chunks; the chunks' ids go to `removed`."""
        db = self._db
        row = db.execute("SELECT id, terms FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        file_id, path_terms = row
        gone = [0, 0, 0, 0]
        # a contentless index forgets a row given the very values it was given
        for chunk_id, packed in db.execute("SELECT id, terms FROM chunks WHERE file_id = ?", (file_id,)):
            symbol, body = unpack_terms(packed)
            db.execute(
                "INSERT INTO lexical (lexical, rowid, symbol, path, body) VALUES ('delete', ?, ?, ?, ?)",
                (chunk_id, symbol, path_terms, body),
            )
            removed.append(chunk_id)
            gone[0] += 1
            gone[1] += len(symbol)
            gone[2] += len(path_terms)
            gone[3] += len(body)
        db.execute(
            "UPDATE totals SET chunks = chunks - ?, symbol = symbol - ?, path = path - ?, body = body - ?",
            gone,
        )
        db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
        db.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def _write_file(self, update: FileUpdate, added: list[tuple[int, int]], removed: list[int]) -> None:
        """Write one file; (chunk id, file id) of each chunk written go to `added`, the ids
        of those its old version had to `removed`."""
        db = self._db
        if update.chunks is None:
            db.execute(
                "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                (update.size, update.mtime_ns, update.path),
            )
            return
        self._delete(update.path, removed)
        # every chunk of a file has its path's terms
        path_terms = update.terms[0][1] if update.terms else ""
        cursor = db.execute(
            "INSERT INTO files (path, size, mtime_ns, hash, status, terms) VALUES (?, ?, ?, ?, ?, ?)",
            (update.path, update.size, update.mtime_ns, update.hash, update.status, path_terms),
        )
        file_id = cursor.lastrowid
        for chunk, (symbol, path, body) in zip(update.chunks, update.terms, strict=True):
            if path != path_terms:
                raise ValueError(f"{update.path}: the chunks' path terms differ")
            cursor = db.execute(
                "INSERT INTO chunks (file_id, start_line, end_line, kind, symbol, text, terms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    file_id,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.kind,
                    chunk.symbol,
                    chunk.text,
                    pack_terms(symbol, body),
                ),
            )
            chunk_id = cursor.lastrowid
            db.execute(
                "INSERT INTO lexical (rowid, symbol, path, body) VALUES (?, ?, ?, ?)",
                (chunk_id, symbol, path, body),
            )
            if chunk_id is not None and file_id is not None:
                added.append((chunk_id, file_id))
        lengths = [sum(len(field) for field in fields) for fields in zip(*update.terms, strict=True)]
        if lengths:
            db.execute(
                "UPDATE totals SET chunks = chunks + ?, symbol = symbol + ?, path = path + ?, "
                "body = body + ?",
                (len(update.terms), *lengths),
            )

    # -- the tools' side ----------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(indexed files, chunks)."""
        with self._lock:
            self._guard()
            # counted again after a write of this store's or of another connection's
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            if self._counts is None or self._counted != version:
                files = self._db.execute("SELECT count(*) FROM files WHERE status = 'indexed'").fetchone()[0]
                chunks = self._db.execute("SELECT count(*) FROM chunks").fetchone()[0]
                self._counts, self._counted = (files, chunks), version
            return self._counts

    def stats(self) -> Stats:
        """The collection's size and average field lengths, for BM25F."""
        with self._lock:
            self._guard()
            chunks, *sums = self._db.execute("SELECT chunks, symbol, path, body FROM totals").fetchone()
        count = max(chunks, 1)
        return Stats(chunks=chunks, average=(sums[0] / count, sums[1] / count, sums[2] / count))

    def search(self, terms: Sequence[str], *, limit: int, path_glob: str | None = None) -> list[Hit]:
        """The chunks holding the query's terms, best BM25F first (at most `limit`).

        Args:
            terms: Index terms (terms.py); each is matched as a whole token.
            limit: How many chunks at most.
            path_glob: Only chunks of files whose path matches this fnmatch glob.
        """
        unique = list(dict.fromkeys(terms))
        if not unique:
            return []
        stats = self.stats()
        marks = ", ".join("?" * len(unique))
        with self._lock:
            found = self._db.execute(f"SELECT term, doc FROM lexical_terms WHERE term IN ({marks})", unique)
            df: dict[str, int] = dict(found.fetchall())
        present = sorted((term for term in unique if df.get(term)), key=lambda term: df[term])
        if not present:
            return []
        rare = [present[0]]
        postings = df[present[0]]
        for term in present[1:]:
            if postings + df[term] > CANDIDATE_POSTINGS:
                break
            rare.append(term)
            postings += df[term]
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in rare)
        # a path filter is applied to a wider candidate list
        wanted = limit if path_glob is None else max(limit * 20, 2000)
        with self._lock:
            ids = [
                row[0]
                for row in self._db.execute(
                    "SELECT rowid FROM lexical WHERE lexical MATCH ? ORDER BY rank LIMIT ?", (match, wanted)
                )
            ]
            rows = (
                self._db.execute(
                    "SELECT chunks.id, files.path, chunks.start_line, chunks.end_line, chunks.kind, "
                    "chunks.symbol, chunks.text, chunks.terms, files.terms FROM chunks "
                    "JOIN files ON files.id = chunks.file_id "
                    f"WHERE chunks.id IN ({', '.join('?' * len(ids))})",
                    ids,
                ).fetchall()
                if ids
                else []
            )
        weights = {term: idf(df[term], stats.chunks) for term in present}
        hits = [
            _hit(row, score(_fields(row[7], row[8]), weights, stats))
            for row in rows
            if path_glob is None or fnmatch.fnmatchcase(row[1], path_glob)
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return hits[:limit]

    def read_apart(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` done in one read transaction on a read-only connection of its own (one
        snapshot of the database), without the store's lock: neither the indexer nor the
        tools wait for it (vectors.py loads every vector this way)."""
        with self._lock:
            self._guard()
        db = sqlite3.connect(
            f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
        try:
            db.execute("BEGIN")
            return work(db)
        finally:
            db.close()

    def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` done on the database under the store's lock (for vectors.py's tables)."""
        with self._lock:
            return work(self._db)

    def chunks(self, ids: Sequence[int], *, path_glob: str | None = None) -> list[Hit]:
        """The hits (score 0) of those of `ids` still indexed, whose path matches `path_glob`."""
        if not ids:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT chunks.id, files.path, chunks.start_line, chunks.end_line, chunks.kind, "
                "chunks.symbol, chunks.text FROM chunks JOIN files ON files.id = chunks.file_id "
                f"WHERE chunks.id IN ({', '.join('?' * len(ids))})",
                list(ids),
            ).fetchall()
        return [_hit(row, 0.0) for row in rows if path_glob is None or fnmatch.fnmatchcase(row[1], path_glob)]

    def paths(self) -> list[str]:
        """Every indexed file's path."""
        with self._lock:
            self._guard()
            rows = self._db.execute(
                "SELECT path FROM files WHERE status = 'indexed' ORDER BY path"
            ).fetchall()
        return [row[0] for row in rows]


def _fields(packed: bytes, path_terms: str) -> tuple[str, str, str]:
    symbol, body = unpack_terms(packed)
    return symbol, path_terms, body


def _hit(row: Sequence[Any], score: float) -> Hit:
    """A hit of a row that starts (chunk id, path, start, end, kind, symbol, text)."""
    return Hit(
        chunk_id=row[0],
        path=row[1],
        start_line=row[2],
        end_line=row[3],
        kind=row[4],
        symbol=row[5],
        text=row[6],
        score=score,
    )
