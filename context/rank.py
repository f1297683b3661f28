"""Ranking as a pipeline of pure functions: question → terms → candidates → re-rank → files.

1. `parse_query`: the question's index terms (terms.py), its words' stems and its
   "keys": each identifier as written with its words joined, and each run of two or three
   neighbouring words joined (so "retry policy" names `RetryPolicy` and `retry_policy`).
   A name is named by a question when its words joined are a key, or when each of its
   words is in the question ("where is the backoff decided" names `decide_backoff`).
   It also notes whether the question asks for tests, documentation or vendored code.
2. The lexical candidates: the store's BM25 over the chunks' terms (store.py).
3. `rerank`: code-aware signals multiply each candidate's BM25 score:
   - `SYMBOL`: a definition whose own name is one of the question's keys (x `SYMBOL`),
     more when its container is named too (x `QUALIFIED`);
   - `FILE_NAME` / `FOLDER`: the file's name, or one of its folders, is a key;
   - `DEMOTED`: tests, documentation, vendored and generated files count less unless the
     question asks for them (`file_role`).
4. `per_file`: at most `limit` chunks of each file, best first.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import attrs
import snowballstemmer

from assern.actors.search.text import words
from assern.context.store import Hit
from assern.context.terms import STOP_WORDS, identifiers

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from assern.context.terms import Terms

#: A definition whose name the question mentions.
SYMBOL = 1.5
#: ... and whose container (class, type, module) it mentions too.
QUALIFIED = 1.5
#: The file's own name (without its extension) is one of the question's keys.
FILE_NAME = 1.8
#: One of the file's folders is.
FOLDER = 1.2
#: Each role's weight when the question does not ask for it.
DEMOTED = {"test": 0.55, "docs": 0.6, "vendor": 0.3, "generated": 0.3}
#: The words that ask for a role (its files are then not demoted).
ASKS_FOR = {
    "test": frozenset({"test", "tests", "testing", "tested", "spec", "specs", "fixture", "fixtures", "mock"}),
    "docs": frozenset(
        {"doc", "docs", "documentation", "readme", "guide", "manual", "changelog", "documented"}
    ),
    "vendor": frozenset({"vendor", "vendored", "third", "thirdparty", "external", "dependency"}),
    "generated": frozenset({"generated", "generate", "codegen", "protobuf", "pb", "minified"}),
}


@attrs.frozen(kw_only=True)
class Query:
    """A question, analysed once.

    Attributes:
        text: The question as asked.
        terms: Its index terms (what the lexical index is searched for).
        keys: Stems, identifiers and runs of two or three words, each as stems joined.
        stems: The stems of its words (stop words left out).
        qualified: Identifiers written with a dot or `::` (`Retry.decide`), as keys.
        wants: The roles (test, docs, vendor, generated) the question asks for.
    """

    text: str
    terms: tuple[str, ...]
    keys: frozenset[str]
    stems: frozenset[str] = frozenset()
    qualified: frozenset[tuple[str, ...]] = frozenset()
    wants: frozenset[str] = frozenset()


_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return "" if word in STOP_WORDS or len(word) < 2 else _STEMMER.stemWord(word)


@functools.lru_cache(maxsize=65536)  # file, folder and symbol names come again and again
def _stems(text: str) -> tuple[str, ...]:
    """The stems of the words of `text` that are not stop words."""
    return tuple(stem for word in words(text) if (stem := _stem(word)))


def _key(text: str) -> str:
    return "".join(_stems(text))


def names(text: str, query: Query) -> bool:
    """Whether the question names `text` (a symbol's own name, a file or folder name):
    its words joined are one of the question's keys, or each of its words is in it."""
    stems = _stems(text)
    return bool(stems) and ("".join(stems) in query.keys or set(stems) <= query.stems)


def parse_query(text: str, terms: Terms) -> Query:
    """Analyse a question (step 1 of the module docstring)."""
    plain = words(text)
    content = [stem for word in plain if (stem := _stem(word))]
    keys = set(content)
    for size in (2, 3):
        keys.update("".join(content[i : i + size]) for i in range(len(content) - size + 1))
    qualified = set()
    for identifier in identifiers(text):
        parts = tuple(key for part in re.split(r"\.|::|->", identifier) if (key := _key(part)))
        keys.update(parts)
        if len(parts) > 1:
            qualified.add(parts)
    wants = frozenset(role for role, asking in ASKS_FOR.items() if asking & set(plain))
    return Query(
        text=text,
        terms=tuple(terms.terms(text)),
        keys=frozenset(keys),
        stems=frozenset(content),
        qualified=frozenset(qualified),
        wants=wants,
    )


_TEST_NAME = re.compile(
    r"(^test_.*\.py$|_test\.py$|^conftest\.py$|_test\.go$|\.(test|spec)\.[cm]?[jt]sx?$|Tests?\.java$|_spec\.rb$"
    r"|_test\.rb$|_test\.(c|cc|cpp)$|^test_.*\.(c|cc|cpp|sh)$)"
)
_GENERATED_NAME = re.compile(
    r"(_pb2(_grpc)?\.pyi?$|\.pb\.go$|\.min\.(js|css)$|[._-]generated\.|_gen\.go$|\.g\.dart$)"
)
_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testing", "testdata", "fixtures"})
_DOC_DIRS = frozenset({"doc", "docs", "documentation", "site", "examples-docs"})
_VENDOR_DIRS = frozenset({"vendor", "vendored", "third_party", "thirdparty", "external", "extern", "deps"})
_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc")


@functools.lru_cache(maxsize=65536)
def file_role(path: str) -> str | None:
    """ "test", "docs", "vendor" or "generated" when the path says the file is one."""
    parts = path.split("/")
    folders, name = {part.lower() for part in parts[:-1]}, parts[-1]
    if folders & _VENDOR_DIRS:
        return "vendor"
    if _GENERATED_NAME.search(name) or "generated" in folders:
        return "generated"
    if folders & _TEST_DIRS or _TEST_NAME.search(name):
        return "test"
    if folders & _DOC_DIRS or name.lower().endswith(_DOC_SUFFIXES):
        return "docs"
    return None


@attrs.frozen(kw_only=True)
class Scored:
    """A candidate chunk with its final score and the signals that raised it."""

    hit: Hit
    score: float
    because: tuple[str, ...] = ()


def symbol_signal(hit: Hit, query: Query) -> tuple[float, str | None]:
    """x`SYMBOL` for a definition named in the question (x`QUALIFIED` more with its container)."""
    if hit.symbol is None or hit.kind in ("code", "text"):
        return 1.0, None
    parts = hit.symbol.split(" > " if hit.kind == "section" else ".")
    if not names(parts[-1], query):
        return 1.0, None
    keys = tuple(_key(part) for part in parts)
    if len(parts) > 1 and (names(parts[-2], query) or any(q == keys[-len(q) :] for q in query.qualified)):
        return SYMBOL * QUALIFIED, hit.symbol
    return SYMBOL, hit.symbol


def path_signal(path: str, query: Query) -> float:
    """x`FILE_NAME` when the question names the file, x`FOLDER` when it names one of its folders."""
    parts = path.split("/")
    factor = FILE_NAME if names(parts[-1].split(".")[0], query) else 1.0
    if any(names(folder, query) for folder in parts[:-1]):
        factor *= FOLDER
    return factor


def role_signal(path: str, query: Query) -> float:
    """The demotion of a test, docs, vendored or generated file the question does not ask for."""
    role = file_role(path)
    return 1.0 if role is None or role in query.wants else DEMOTED[role]


#: The re-ranking signals by name (what `rerank`'s `signals` and the server's
#: ASSERN_CONTEXT_RERANK_DISABLE name).
SIGNALS = ("symbol", "path", "role")


def rerank(hits: Iterable[Hit], query: Query, *, signals: Collection[str] = SIGNALS) -> list[Scored]:
    """Each candidate scored by BM25F times the named signals, best first (step 3)."""
    scored = []
    by_path: dict[str, float] = {}  # the path's signals, once per file
    for hit in hits:
        score, because = hit.score, []
        if "symbol" in signals:
            factor, symbol = symbol_signal(hit, query)
            if symbol is not None:
                because.append(symbol)
            score *= factor
        if hit.path not in by_path:
            by_path[hit.path] = (path_signal(hit.path, query) if "path" in signals else 1.0) * (
                role_signal(hit.path, query) if "role" in signals else 1.0
            )
        score *= by_path[hit.path]
        scored.append(Scored(hit=hit, score=score, because=tuple(because)))
    scored.sort(key=lambda s: (-s.score, s.hit.path, s.hit.start_line))
    return scored


def per_file(scored: Sequence[Scored], *, limit: int = 1) -> list[Scored]:
    """At most `limit` chunks of each file, in the order given (step 4)."""
    seen: dict[str, int] = {}
    kept = []
    for item in scored:
        count = seen.get(item.hit.path, 0)
        if count < limit:
            kept.append(item)
            seen[item.hit.path] = count + 1
    return kept
