"""Keeping a root's database in step with its files: plan what changed, index it in batches.

`plan` compares a walk with what the database knows: a file is looked at again when its
size or mtime differs (or it is new); a known file the walk no longer keeps leaves the
index. `prepare` reads one file and turns it into a `FileUpdate`: when its content hash
is the one already stored, only its stat is updated; otherwise it is chunked and its
terms computed. `Indexer.run_batch` writes one batch per transaction (store.py).
Everything here is blocking: the server calls it from a worker thread.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import attrs

from assern.context.chunk import chunk_file, windows
from assern.context.scan import SNIFF_BYTES, FoundFile, looks_binary
from assern.context.store import FileUpdate, content_hash

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from assern.context.store import Known, Store
    from assern.context.terms import Terms

#: Files per transaction: small enough that the first answers come early, large enough
#: that commits do not dominate.
BATCH_FILES = 200
#: Bytes of text per transaction, whichever comes first.
BATCH_BYTES = 8_000_000


@attrs.frozen(kw_only=True)
class Plan:
    """What to do to bring the database in step with a walk."""

    changed: tuple[FoundFile, ...]
    deleted: tuple[str, ...]


def plan(found: Sequence[FoundFile], known: Mapping[str, Known]) -> Plan:
    """The files to read again (new, or size or mtime changed) and the paths to drop."""
    kept = {file.path for file in found}
    changed = tuple(
        file
        for file in found
        if (old := known.get(file.path)) is None or old.size != file.size or old.mtime_ns != file.mtime_ns
    )
    deleted = tuple(path for path in known if path not in kept)
    return Plan(changed=changed, deleted=deleted)


def batches(files: Sequence[FoundFile]) -> list[list[FoundFile]]:
    """`files` cut into batches of at most `BATCH_FILES` files and about `BATCH_BYTES`."""
    out: list[list[FoundFile]] = []
    current: list[FoundFile] = []
    size = 0
    for file in files:
        if current and (len(current) >= BATCH_FILES or size + file.size > BATCH_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(file)
        size += file.size
    if current:
        out.append(current)
    return out


@attrs.frozen(kw_only=True)
class Outcome:
    """One file's fate: an update to write, or a path that vanished, or a problem to log."""

    update: FileUpdate | None = None
    vanished: bool = False
    problem: str | None = None


def prepare(root: Path, file: FoundFile, known: Known | None, terms: Terms, *, max_file_size: int) -> Outcome:
    """Read one file and make what the database should hold of it.

    A file deleted since the walk has `vanished`; one that cannot be read, is binary or
    has grown past the limit is stored with that status (and no chunks), so it is not
    read again until it changes.
    """
    path = os.path.join(root, file.path)
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read(max_file_size + 1)
    except FileNotFoundError:
        return Outcome(vanished=True)
    except OSError as exc:
        status = FileUpdate(
            path=file.path, size=file.size, mtime_ns=file.mtime_ns, hash="", status="unreadable", chunks=()
        )
        return Outcome(update=status, problem=f"unreadable: {exc.strerror or exc}")
    digest = content_hash(data)
    size, mtime = stat.st_size, stat.st_mtime_ns
    if known is not None and known.hash == digest:
        return Outcome(update=FileUpdate(path=file.path, size=size, mtime_ns=mtime, hash=digest))
    if len(data) > max_file_size:
        update = FileUpdate(
            path=file.path, size=size, mtime_ns=mtime, hash=digest, status="too-large", chunks=()
        )
        return Outcome(update=update, problem=f"grew past {max_file_size} bytes")
    if looks_binary(data[:SNIFF_BYTES]):
        update = FileUpdate(
            path=file.path, size=size, mtime_ns=mtime, hash=digest, status="binary", chunks=()
        )
        return Outcome(update=update)
    text = data.decode("utf-8", errors="replace")
    problem = None
    try:
        chunks = chunk_file(file.path, text)
    except (RecursionError, ValueError, MemoryError) as exc:  # one odd file must not stop the index
        chunks = list(windows(text.split("\n"), 1, text.count("\n") + 1))
        problem = f"cut into line windows: its syntax tree could not be read ({type(exc).__name__})"
    path_terms = " ".join(terms.terms(file.path))
    chunk_terms = [
        (" ".join(terms.terms(chunk.symbol or "")), path_terms, " ".join(terms.terms(chunk.text)))
        for chunk in chunks
    ]
    update = FileUpdate(
        path=file.path, size=size, mtime_ns=mtime, hash=digest, chunks=chunks, terms=chunk_terms
    )
    return Outcome(update=update, problem=problem)


class Indexer:
    """Indexes batches of one root's files into its store (blocking; one thread at a time)."""

    def __init__(self, root: Path, store: Store, terms: Terms, *, max_file_size: int) -> None:
        self.root = root
        self.store = store
        self.terms = terms
        self.max_file_size = max_file_size

    def run_batch(
        self, files: Sequence[FoundFile], known: Mapping[str, Known], deleted: Sequence[str] = ()
    ) -> list[tuple[str, str]]:
        """Read, chunk and write one batch (one transaction); (path, problem) pairs back."""
        updates: list[FileUpdate] = []
        gone = list(deleted)
        problems: list[tuple[str, str]] = []
        for file in files:
            outcome = prepare(
                self.root, file, known.get(file.path), self.terms, max_file_size=self.max_file_size
            )
            if outcome.vanished:
                gone.append(file.path)
            if outcome.update is not None:
                updates.append(outcome.update)
            if outcome.problem is not None:
                problems.append((file.path, outcome.problem))
        self.store.write(updates, gone)
        return problems
