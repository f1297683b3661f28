"""The three tools of the context server: their schemas, their checks and their answers.

`Engine` answers `semantic_search`, `get_file` and `get_context_for_prompt` from a root's
store, blocking (the server calls it from a worker thread). Every bad input raises
`ToolError` with a message that says what was wrong; the server turns it into a tool
result with `isError`. Nothing here speaks MCP.

`get_file` returns files of the root only: a path that leaves it (`..`, an absolute path
elsewhere, a symbolic link whose target is outside), a secret file (scan.SECRETS) or
anything inside `.git/` is refused, whatever the index holds.
"""

from __future__ import annotations

import functools
import os
import posixpath
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema_rs

from assern.context.bundle import fill, render_bundle
from assern.context.rank import SIGNALS, Scored, file_role, parse_query, per_file, rerank
from assern.context.scan import SNIFF_BYTES, looks_binary

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from assern.context.fusion import Meaning
    from assern.context.scan import SecretFilter
    from assern.context.store import Store
    from assern.context.terms import Terms

#: How many lexical candidates the re-ranking sees.
CANDIDATES = 200
#: `get_file` returns at most this many lines, or bytes, at once.
FILE_LINES = 2000
FILE_BYTES = 200_000
#: Lines of each result shown in `semantic_search`'s text rendering.
PREVIEW_LINES = 8
#: Chunks of one file a bundle may hold.
SNIPPETS_PER_FILE = 3


class ToolError(Exception):
    """A call the tool refuses; the message says why and goes back to the caller."""


READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}

_RESULT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "start_line": {"type": "integer"},
        "end_line": {"type": "integer"},
        "score": {"type": "number"},
        "symbol": {"type": "string"},
        "text": {"type": "string"},
    },
    "required": ["path", "start_line", "end_line", "score", "text"],
}
_INDEX = {
    "type": "object",
    "properties": {
        "files": {"type": "integer"},
        "pending": {"type": "integer"},
        "vectors_pending": {"type": "integer"},
    },
    "required": ["files", "pending"],
}

TOOLS: dict[str, dict[str, Any]] = {
    "semantic_search": {
        "description": (
            "Search this project's code and docs for a question or a name; returns the best "
            "chunks (definitions, sections) with their file, lines and symbol.\n\n"
            "Ask as you would a colleague ('where is the retry policy decided?', "
            "'how does login reach the database?') or give identifiers (`Retry.decide`). "
            "`path` limits the search to files matching a glob (`src/**/*.py`)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2000,
                    "description": "The question.",
                },
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 10,
                    "description": "How many results (1-50).",
                },
                "path": {"type": "string", "minLength": 1, "description": "Only files matching this glob."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"results": {"type": "array", "items": _RESULT}, "index": _INDEX},
            "required": ["results", "index"],
        },
    },
    "get_file": {
        "description": (
            "Read a file of this project (a path relative to its root), whole or from "
            "`start_line` to `end_line` (1-based, inclusive). A long file is cut, with a note "
            "saying how to ask for the rest. Secret files and paths outside the project are refused."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "Relative to the project's root."},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    "get_context_for_prompt": {
        "description": (
            "The code and docs most relevant to a task, in one bundle within a token budget: "
            "the best snippets grouped by file (each file once), a summary of why each file "
            "was chosen, and hints of related files (their tests, callers of what matched)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "The task."},
                "max_files": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                "max_tokens": {"type": "integer", "minimum": 100, "maximum": 100_000, "default": 4000},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "files": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "snippets": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {"text": {"type": "string"}, "lines": {"type": "string"}},
                                    "required": ["text", "lines"],
                                },
                            },
                        },
                        "required": ["path", "snippets"],
                    },
                },
                "hints": {"type": "array", "items": {"type": "string"}},
                "tokens": {"type": "integer"},
            },
            "required": ["summary", "files", "hints", "tokens"],
        },
    },
}

_VALIDATORS = {name: jsonschema_rs.validator_for(tool["inputSchema"]) for name, tool in TOOLS.items()}


def check_arguments(tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments, checked against the tool's input schema, with defaults filled in.

    Raises:
        ToolError: naming every problem ("top_k: 500 is greater than the maximum of 50").
    """
    schema = TOOLS[tool]["inputSchema"]
    given = dict(arguments or {})
    problems = []
    for error in _VALIDATORS[tool].iter_errors(given):
        where = "/".join(str(part) for part in error.instance_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    if problems:
        raise ToolError(f"invalid arguments for {tool}: " + "; ".join(problems))
    for key, prop in schema["properties"].items():
        if key not in given and "default" in prop:
            given[key] = prop["default"]
    if isinstance(given.get("query"), str) and not given["query"].strip():
        raise ToolError(f"invalid arguments for {tool}: query: the query is blank")
    return given


@attrs.mutable
class IndexState:
    """How far the index of the root has come (written by the indexer, read by the tools)."""

    pending: int = 0
    complete: bool = False
    watching: bool = False
    #: the first check of the tree is done (and the watcher, if any, is in place)
    ready: bool = False

    @property
    def reported(self) -> int:
        """`pending` as the tools say it: at least 1 until the index is known current."""
        return self.pending if self.ready else max(self.pending, 1)


@attrs.frozen(kw_only=True)
class Answer:
    """A tool's answer: its text blocks and, for the structured tools, `structuredContent`."""

    texts: tuple[str, ...]
    structured: dict[str, Any] | None = None


class Engine:
    """Answers the three tools for one root (blocking: call it from a worker thread)."""

    def __init__(
        self,
        root: Path,
        store: Store,
        terms: Terms,
        secret: SecretFilter,
        state: IndexState,
        *,
        signals: Collection[str] = SIGNALS,
        meaning: Meaning | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        #: the fusion hook: the lexical candidates fused with the meaning (fusion.py)
        self.meaning = meaning
        self.signals = tuple(signals)
        self.store = store
        self.terms = terms
        self.secret = secret
        self.state = state

    def call(self, tool: str, arguments: Mapping[str, Any] | None) -> Answer:
        """Answer one call.

        Raises:
            ToolError: an unknown tool, bad arguments, or a refused path.
        """
        if tool not in TOOLS:
            raise ToolError(f"unknown tool {tool!r} (tools: {', '.join(TOOLS)})")
        args = check_arguments(tool, arguments)
        if tool == "semantic_search":
            return self.semantic_search(args["query"], top_k=args["top_k"], path=args.get("path"))
        if tool == "get_file":
            return self.get_file(
                args["path"], start_line=args.get("start_line"), end_line=args.get("end_line")
            )
        return self.get_context_for_prompt(
            args["query"], max_files=args["max_files"], max_tokens=args["max_tokens"]
        )

    def index_info(self) -> dict[str, int]:
        """The index's files and those pending: still to index or, when ranking by
        meaning, still waiting for their vectors (then also `vectors_pending`: those
        files are ranked by their words until their vectors are there)."""
        files, _ = self.store.counts()
        if self.meaning is None:
            return {"files": files, "pending": self.state.reported}
        waiting = self.meaning.pending()
        if not waiting:
            return {"files": files, "pending": self.state.reported}
        return {"files": files, "pending": self.state.reported + waiting, "vectors_pending": waiting}

    def ranked(self, question: str, *, path: str | None = None) -> list[Scored]:
        query = parse_query(question, self.terms)
        hits = self.store.search(query.terms, limit=CANDIDATES, path_glob=path)
        if self.meaning is not None:
            hits = self.meaning.candidates(question, hits, path)
        return rerank(hits, query, signals=self.signals)

    # -- semantic_search ----------------------------------------------------------------

    def semantic_search(self, question: str, *, top_k: int, path: str | None) -> Answer:
        best = per_file(self.ranked(question, path=path))[:top_k]
        results = []
        for item in best:
            hit = item.hit
            result: dict[str, Any] = {
                "path": hit.path,
                "start_line": hit.start_line,
                "end_line": hit.end_line,
                "score": round(item.score, 4),
                "text": hit.text,
            }
            if hit.symbol is not None:
                result["symbol"] = hit.symbol
            results.append(result)
        index = self.index_info()
        return Answer(
            texts=(render_results(results, index),), structured={"results": results, "index": index}
        )

    # -- get_file -----------------------------------------------------------------------

    def resolve(self, path: str) -> tuple[str, Path]:
        """The relative POSIX path and the real file a `get_file` path names.

        Raises:
            ToolError: the path leaves the root, names a secret, or no readable file.
        """
        if "\0" in path:
            raise ToolError("invalid path: it contains a NUL character")
        given = path.replace("\\", "/")
        if posixpath.isabs(given):
            inside = os.path.relpath(given, self.root).replace(os.sep, "/")
            if inside == ".." or inside.startswith("../"):
                raise ToolError(f"refused: {path!r} is outside the project's root")
            given = inside
        relative = posixpath.normpath(given)
        if relative == ".." or relative.startswith("../"):
            raise ToolError(f"refused: {path!r} leads outside the project's root")
        if self.secret(relative):
            raise ToolError(
                f"refused: {path!r} is a secret file (keys, credentials, .env files are never returned)"
            )
        real = Path(os.path.realpath(self.root / relative))
        if real != self.root and self.root not in real.parents:
            raise ToolError(f"refused: {path!r} is a symbolic link to a file outside the project's root")
        real_relative = real.relative_to(self.root).as_posix()
        if self.secret(real_relative):
            raise ToolError(
                f"refused: {path!r} leads to a secret file (keys, credentials, .env files are never returned)"
            )
        if real.is_dir():
            raise ToolError(f"{path!r} is a folder, not a file")
        if not real.is_file():
            raise ToolError(f"no such file: {path!r} (paths are relative to the project's root)")
        return relative, real

    def get_file(self, path: str, *, start_line: int | None, end_line: int | None) -> Answer:
        relative, real = self.resolve(path)
        if start_line is not None and end_line is not None and end_line < start_line:
            raise ToolError(
                f"invalid arguments for get_file: end_line {end_line} is before start_line {start_line}"
            )
        try:
            data = real.read_bytes()
        except OSError as exc:
            raise ToolError(f"cannot read {path!r}: {exc.strerror or exc}") from None
        if looks_binary(data[:SNIFF_BYTES]):
            raise ToolError(f"{path!r} is a binary file")
        lines = data.decode("utf-8", errors="replace").splitlines()
        total = len(lines)
        first = start_line or 1
        if total == 0 and first == 1:
            return Answer(texts=("",))
        if first > total:
            raise ToolError(f"start_line {first} is past the end of {relative!r}, which has {total} lines")
        last = min(end_line or total, total)
        last = min(last, first + FILE_LINES - 1)
        chosen = lines[first - 1 : last]
        size = 0
        for index, line in enumerate(chosen):
            size += len(line) + 1
            if size > FILE_BYTES and index > 0:
                chosen = chosen[:index]
                last = first + index - 1
                break
        texts = ["\n".join(chosen)]
        wanted_last = min(end_line or total, total)
        if last < wanted_last:
            texts.append(
                f"[{relative}: lines {first}-{last} of {total} shown; ask get_file with "
                f"start_line={last + 1} for the rest]"
            )
        return Answer(texts=tuple(texts))

    # -- get_context_for_prompt ---------------------------------------------------------

    def get_context_for_prompt(self, question: str, *, max_files: int, max_tokens: int) -> Answer:
        candidates = per_file(self.ranked(question), limit=SNIPPETS_PER_FILE)
        bundle = fill(
            question, candidates, max_files=max_files, max_tokens=max_tokens, hints=BundleHints(self)
        )
        return Answer(texts=(render_bundle(bundle),), structured=bundle)

    def callers(self, symbol: str, *, exclude: Collection[str] = (), limit: int = 3) -> list[str]:
        """Files other than `exclude` whose text names `symbol`'s own name."""
        return [path for path in self.naming(symbol) if path not in exclude][:limit]

    def naming(self, symbol: str) -> list[str]:
        """The files whose text names `symbol`'s own name (its definition's chunk aside),
        best first, among the index's first 50 matches of that name."""
        name = symbol.rsplit(".", 1)[-1]
        # a name of several words ends with its whole-identifier term (terms.py)
        wanted = self.terms.terms(name)[-1:]
        found: list[str] = []
        for hit in self.store.search(wanted, limit=50):
            if hit.path in found or hit.symbol == symbol or name not in hit.text:
                continue
            found.append(hit.path)
        return found


class BundleHints:
    """The hints of one bundle, asked again as its files are chosen (bundle.py): the
    index's paths are read once, and each symbol's users searched once."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: the index's paths by their file name, read at the first need
        self._by_name: dict[str, list[str]] | None = None
        self._tests: dict[str, tuple[list[str], list[str]]] = {}
        self._naming: dict[str, list[str]] = {}

    def tests_of(self, path: str) -> tuple[list[str], list[str]]:
        """The index's tests of `path`: those beside it, and those named for it elsewhere."""
        if path not in self._tests:
            if self._by_name is None:
                self._by_name = {}
                for known in self.engine.store.paths():
                    self._by_name.setdefault(posixpath.basename(known), []).append(known)
            by_name = self._by_name
            stem = posixpath.basename(path).split(".")[0]
            near = [test for test in sibling_tests(path) if test in by_name.get(posixpath.basename(test), ())]
            named = sorted(known for name in set(_test_names(stem)) for known in by_name.get(name, ()))
            self._tests[path] = (near, named)
        return self._tests[path]

    def __call__(
        self, order: Sequence[str], chosen: Mapping[str, Sequence[Scored]], *, search: bool = True
    ) -> list[str]:
        """Each chosen file's tests, the other users of what matched, and what is pending
        (`search` False: the users of the symbols looked up already, bundle.HintsOf)."""
        hints = []
        for path in order:
            if file_role(path) == "test":
                continue
            near, named = self.tests_of(path)
            tests = [test for test in near if test not in chosen]
            if not tests:
                tests = [test for test in named if test not in chosen][:3]
            if tests:
                hints.append(f"tests of {path}: {', '.join(tests)}")
        for symbol in dict.fromkeys(sym for path in order for s in chosen[path] for sym in s.because):
            if symbol not in self._naming:
                if not search:
                    continue
                self._naming[symbol] = self.engine.naming(symbol)
            callers = [path for path in self._naming[symbol] if path not in order][:3]
            if callers:
                hints.append(f"uses of {symbol}: {', '.join(callers)}")
        return hints + self.pending

    @functools.cached_property
    def pending(self) -> list[str]:
        """What the index still lacks, read once: one answer tells one count."""
        hints = []
        if pending := self.engine.state.reported:
            hints.append(f"the index is still being built: {pending} files pending, so some may be missing")
        meaning = self.engine.meaning
        if meaning is not None and (waiting := meaning.pending()):
            hints.append(f"{waiting} files still wait for their vectors: ranked by their words until then")
        return hints


def _test_names(stem: str) -> list[str]:
    return [
        f"test_{stem}.py",
        f"{stem}_test.py",
        f"{stem}_test.go",
        f"{stem}.test.ts",
        f"{stem}.test.js",
        f"{stem}.spec.ts",
        f"{stem}.spec.js",
        f"{stem}Test.java",
        f"{stem}_spec.rb",
        f"{stem}_test.rb",
    ]


def sibling_tests(path: str) -> list[str]:
    """The usual paths of `path`'s tests beside it (`x_test.go`, `x.test.ts`, `tests/test_x.py`)."""
    folder, name = posixpath.split(path)
    stem = name.split(".")[0]
    near = [posixpath.join(folder, test) for test in _test_names(stem)]
    return [*near, posixpath.join("tests", f"test_{stem}.py")]


def render_results(results: list[dict[str, Any]], index: Mapping[str, int]) -> str:
    """The compact text rendering of `semantic_search`'s results."""
    lines = []
    if not results:
        lines.append("No match.")
    for number, result in enumerate(results, 1):
        symbol = f"  {result['symbol']}" if "symbol" in result else ""
        lines.append(f"{number}. {result['path']}:{result['start_line']}-{result['end_line']}{symbol}")
        preview = result["text"].split("\n")
        lines += [f"    {line}" for line in preview[:PREVIEW_LINES]]
        if len(preview) > PREVIEW_LINES:
            lines.append(f"    … ({len(preview) - PREVIEW_LINES} more lines)")
    if index["pending"]:
        lines.append(f"(index: {index['files']} files, {index['pending']} still pending)")
    if index.get("vectors_pending"):
        lines.append(
            f"({index['vectors_pending']} files still wait for their vectors: "
            "ranked by their words until then)"
        )
    return "\n".join(lines)
