"""Semantic ranking, the optional `assern[semantic]` extra: the meaning of a query next to
its words.

The model is WordLlama's `l2_supercat` (256 dimensions, MIT): static token embeddings
taken from a large language model's embedding table and trained for sentence
similarity, about 16 MB, *installed by pip inside the `wordllama` wheel* and loaded from
there with downloads disabled, so nothing is fetched at run time and it works offline.
A text's vector is the pooled vector of its tokens: embedding a query takes about
0.1 ms, ten thousand tools about 0.2 s.

Each tool is embedded once, keyed by its definition (`tool_key`): the vectors are
computed in the background (semantic_actor.py), kept in `Vectors` and on disk, so a
restart or a view with other names reuses them. A search (`blended_find`) ranks the
index's tools by words (BM25F, index.py) and weighs in the meaning: each of the best
`CANDIDATES` by words has its score times 1 + `MEANING_WEIGHT` x its cosine similarity
to the query, so of two tools the words find alike the one closer in meaning comes
first, while the meaning never lifts a tool the words did not find above one they did.
When the words find fewer tools than asked for (a query of words no tool uses), the
tools most similar in meaning follow them. A tool asked for by its exact name stays
first. This blend replaced a reciprocal rank fusion of the two rankings, which on the
benchmark's held-out steps ranked below the words alone (docs/search-evaluation.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog

if TYPE_CHECKING:
    import mcp_types as types
    import numpy as np
    import numpy.typing as npt

    from assern.actors.config.spec import Profile, Settings
    from assern.actors.search.index import Doc, Found, SearchIndex

    Matrix = npt.NDArray[np.float32]

log = structlog.get_logger()

#: the model's name, part of the cache file's name (another model, another cache)
MODEL = "wordllama-l2_supercat-256"
#: with the meaning, each of the best `CANDIDATES` tools by words scores times 1 + this x
#: its cosine similarity to the query: chosen on the tuning part of the benchmark's
#: labelled steps (ops/bench/search/candidates.py, 0.1 to 1.0 tried), where it found
#: 0.708 of the steps in the first five against 0.658 for a rank fusion and 0.683 for
#: the words alone (docs/search-evaluation.md)
MEANING_WEIGHT = 0.5
#: how many tools by words the meaning re-weighs, and by meaning may follow them
CANDIDATES = 20
#: tools less similar than this to the query are not offered by the semantic ranking
SIMILARITY_FLOOR = 0.3
#: the longest text of one tool that is embedded
TEXT_LIMIT = 2000


def search_expected(settings: Settings) -> bool:
    """Whether `settings` may serve search exposure: the settings' own or a profile's
    exposure is "search", or a `max_tools` / `max_list_tokens` may switch a view to it."""
    layers: list[Settings | Profile] = [settings, *settings.profiles]
    return any(
        layer.exposure == "search" or layer.max_tools is not None or layer.max_list_tokens is not None
        for layer in layers
    )


def installed() -> bool:
    """Whether the extra's packages are installed (`pip install 'assern[semantic]'`)."""
    return all(importlib.util.find_spec(name) is not None for name in ("wordllama", "numpy"))


class Embedder:
    """The model, loaded from the files its wheel installed (never downloaded).

    Raises:
        ImportError: the extra is not installed.
        FileNotFoundError: the wheel lacks its model files.
    """

    name = MODEL

    def __init__(self) -> None:
        import wordllama
        from wordllama import WordLlama

        folder = Path(wordllama.__file__).parent
        self._model = WordLlama.load(cache_dir=folder, disable_download=True)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text."""
        import numpy as np

        return np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32)


def tool_text(name: str, tool: types.Tool) -> str:
    """What is embedded of a tool (`name`: its server's own name for it): the name in
    words, title, description, parameters."""
    from assern.actors.search.index import parameter_texts  # loaded with the model, not before
    from assern.actors.search.text import words

    parts = [" ".join(words(name)), tool.title or "", tool.description or ""]
    parts += parameter_texts(tool.input_schema)
    return " ".join(part for part in parts if part)[:TEXT_LIMIT]


def tool_key(server: str, name: str, tool: types.Tool) -> str:
    """A tool's vector's key: its server, its own name and what `tool_text` reads of it
    (the same whatever name a view exposes it under)."""
    from assern.actors.search.index import parameter_texts

    text = json.dumps([server, name, tool.title, tool.description, parameter_texts(tool.input_schema)])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def doc_key(doc: Doc) -> str | None:
    return tool_key(doc.server, doc.tool, doc.definition) if doc.definition is not None else None


@attrs.frozen(eq=False)
class Vectors:
    """The vectors of every tool embedded so far: row `keys[key]` of `matrix`."""

    model: str
    keys: Mapping[str, int]
    matrix: Matrix

    @classmethod
    def empty(cls, dimensions: int = 256, model: str = MODEL) -> Vectors:
        import numpy as np

        return cls(model=model, keys={}, matrix=np.zeros((0, dimensions), dtype=np.float32))

    def extended(self, keys: Sequence[str], matrix: Matrix) -> Vectors:
        """These vectors plus `matrix`'s rows under `keys`."""
        import numpy as np

        known = dict(self.keys)
        for offset, key in enumerate(keys):
            known[key] = len(self.keys) + offset
        return Vectors(model=self.model, keys=known, matrix=np.vstack([self.matrix, matrix]))

    def kept(self, keys: set[str]) -> Vectors:
        """Only the vectors of `keys` (what the catalogs of now use)."""
        import numpy as np

        rows = [(key, row) for key, row in self.keys.items() if key in keys]
        if len(rows) == len(self.keys):
            return self
        return Vectors(
            model=self.model,
            keys={key: index for index, (key, _) in enumerate(rows)},
            matrix=self.matrix[np.array([row for _, row in rows], dtype=np.int64)]
            if rows
            else self.matrix[:0],
        )


def cache_path(cache_folder: Path, model: str = MODEL) -> Path:
    return cache_folder / f"embeddings-{model}.npz"


def load_vectors(path: Path, model: str = MODEL) -> Vectors:
    """The vectors saved at `path`; empty when there are none or the file is unreadable."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as saved:
            keys = [str(key) for key in saved["keys"]]
            matrix = saved["matrix"].astype(np.float32, copy=False)
    except FileNotFoundError:
        return Vectors.empty(model=model)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("embedding_cache_unreadable", path=str(path), error=str(exc))
        return Vectors.empty(model=model)
    if matrix.ndim != 2 or len(keys) != len(matrix):
        log.warning("embedding_cache_unreadable", path=str(path), error="keys and rows differ")
        return Vectors.empty(model=model)
    return Vectors(model=model, keys={key: row for row, key in enumerate(keys)}, matrix=matrix)


def save_vectors(path: Path, vectors: Vectors) -> None:
    """Write `vectors` to `path` whole (a reader never sees half a file)."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    keys = sorted(vectors.keys, key=vectors.keys.__getitem__)
    with partial.open("wb") as out:
        np.savez(out, keys=np.array(keys, dtype=str), matrix=vectors.matrix)
    os.replace(partial, path)


class Semantic:
    """The model and the vectors of now: what a search needs to rank by meaning.

    A snapshot: the vectors never change under it (the background actor publishes a new
    one). It remembers, per index, which row of the vectors each of the index's tools is.
    """

    def __init__(self, embedder: Embedder, vectors: Vectors) -> None:
        self.embedder = embedder
        self.vectors = vectors
        self._rows: weakref.WeakKeyDictionary[SearchIndex, tuple[list[Doc], Any, Any, dict[Doc, int]]] = (
            weakref.WeakKeyDictionary()
        )

    def _aligned(self, index: SearchIndex) -> tuple[list[Doc], Any, Any]:
        """The index's embedded tools, their vectors (one row each, in their order), and
        their servers; worked out once per index."""
        return self._worked_out(index)[:3]

    def _row_of(self, index: SearchIndex) -> dict[Doc, int]:
        """Each embedded tool's row in `_aligned`'s matrix."""
        return self._worked_out(index)[3]

    def _worked_out(self, index: SearchIndex) -> tuple[list[Doc], Any, Any, dict[Doc, int]]:
        found = self._rows.get(index)
        if found is None:
            import numpy as np

            docs, rows = [], []
            for doc in index.docs():
                key = doc_key(doc)
                row = self.vectors.keys.get(key) if key is not None else None
                if row is not None:
                    docs.append(doc)
                    rows.append(row)
            matrix = self.vectors.matrix[np.array(rows, dtype=np.int64)]
            servers = np.array([doc.server for doc in docs])
            found = (docs, matrix, servers, {doc: row for row, doc in enumerate(docs)})
            self._rows[index] = found
        return found

    def covers(self, index: SearchIndex) -> float:
        """The share of the index's tools that have a vector."""
        docs, _, _ = self._aligned(index)
        return len(docs) / index.total if index.total else 1.0

    def ranked(self, index: SearchIndex, query: str, server: str | None) -> list[tuple[Doc, float]]:
        """The index's tools most similar to `query`, most similar first."""
        return self.compared(index, query, server)[0]

    def compared(
        self, index: SearchIndex, query: str, server: str | None
    ) -> tuple[list[tuple[Doc, float]], Callable[[Doc], float | None]]:
        """The index's best `CANDIDATES` tools by similarity to `query` (at least
        `SIMILARITY_FLOOR`), most similar first, and each tool's similarity (None for a
        tool without a vector yet; -1 for another server's, when `server` is given); the
        query is embedded once. With no vector at all, nothing (and None for every tool)."""
        import numpy as np

        docs, matrix, servers = self._aligned(index)
        if not docs:
            return [], lambda _doc: None
        wanted = self.embedder.embed([query])[0]
        similarity = matrix @ wanted
        if server is not None:
            similarity = np.where(servers == server, similarity, -1.0)
        count = min(CANDIDATES, len(docs))
        best = np.argpartition(-similarity, count - 1)[:count]
        best = best[np.argsort(-similarity[best], kind="stable")]
        ranked = [(docs[i], float(similarity[i])) for i in best if similarity[i] >= SIMILARITY_FLOOR]
        rows = self._row_of(index)

        def of(doc: Doc) -> float | None:
            row = rows.get(doc)
            return None if row is None else float(similarity[row])

        return ranked, of


def blended_find(
    index: SearchIndex, semantic: Semantic, query: str, *, limit: int = 8, server: str | None = None
) -> Found:
    """`index.find` with the meaning weighed in (see the module's docstring)."""
    from assern.actors.search.index import Found, Hit

    lexical, unknown = index.ranked(query, limit=CANDIDATES, server=server)
    total = index.searched(server)
    similar, similarity = semantic.compared(index, query, server)
    cover = index.coverage(query, server)
    if not semantic.covers(index):  # no tool has its vector yet: the words alone
        alone = tuple(Hit(doc=doc, score=score, coverage=cover(doc)) for doc, score in lexical[:limit])
        return Found(hits=alone, total=total, unknown=unknown)
    exact = set(index.exact(query.strip(), server))
    blended = sorted(
        (
            (doc not in exact, -score * (1.0 + MEANING_WEIGHT * (similarity(doc) or 0.0)), i, doc)
            for i, (doc, score) in enumerate(lexical)
        ),
        key=lambda item: item[:3],
    )
    hits = [Hit(doc=doc, score=-negative, coverage=cover(doc)) for _, negative, _, doc in blended[:limit]]
    # The words found too few: the tools closest in meaning follow, each scored at most
    # half the last by words (a tool found by meaning alone matches no word: coverage 0).
    last = hits[-1].score / 2 if hits else 1.0
    by_words = {doc for doc, _ in lexical}
    for doc, close in similar:
        if len(hits) >= limit:
            break
        if doc not in by_words:
            hits.append(Hit(doc=doc, score=last * close, coverage=0.0))
    # the best similarity (of the hits shown when none reaches the floor), for `Found.good`
    best = similar[0][1] if similar else max((similarity(hit.doc) or 0.0 for hit in hits), default=0.0)
    return Found(hits=tuple(hits), total=total, unknown=unknown, similarity=best)
