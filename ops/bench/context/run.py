"""The context engine's benchmark: file-level ranking quality on real code, and the
engine's index times, freshness, latency, memory and database size.

    .venv/bin/python ops/bench/context/run.py                  # everything
    .venv/bin/python ops/bench/context/run.py --json out.json  # also every figure as JSON
    .venv/bin/python ops/bench/context/run.py --smoke          # one small project, 8 queries
    .venv/bin/python ops/bench/context/run.py --no-engine      # the two baselines only

Quality: every query of queries.toml is asked of its project's root (the corpus of
corpus.toml, fetched on first use), and each ranking's answer is reduced to a list of
distinct files (each at the rank of its first result). NDCG@10 (relevance 1 for each
labelled file) and Recall@5 (the share of the labelled files in the first five) are
averaged over the queries, per ranking:

- bm25: a textbook BM25 over whole files (scoring.py), built in this process;
- ripgrep: `rg` with the query's words (stop words dropped), files ranked by their
  number of matches; a pure-Python count of the same matches when no `rg` is found;
- engine lexical | reranked | fused: `python -I -m assern.context --root ROOT` through
  the official `mcp` client on trio, `semantic_search {query, top_k: 10}` once the index
  reports `pending == 0`, with ASSERN_CONTEXT_RANKING set to the mode (README.md beside
  this file says what the engine must accept); "n/a" while `assern.context` is not
  importable. For each engine mode also: the share of queries with a labelled file in
  a 2,000-token `get_context_for_prompt` bundle.

The projects that corpus.toml marks `heldout = true` (their questions in heldout.toml,
written before any ranking was run on them) are scored apart, every ranking again, and
printed below the tuned set as "held-out projects": the re-ranking was chosen on the
tuned set alone, so the held-out figures say how far it carries to code it never saw.

Operations (engine only, over the tuned projects): cold index time per project and of
a synthetic 10,000-file tree (copies of the corpus, each file made distinct), warm
restart time, the time from a saved file to a search that finds it (p95 over several
edits), query latency p95, the engine's RSS (its process tree) and its database size
per 10,000 files.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import scoring  # noqa: E402

TOP_K = 10
BUNDLE_TOKENS = 2000
#: bytes per token, the project's rule (assern.actors.router.views.BYTES_PER_TOKEN)
BYTES_PER_TOKEN = 4
SCALE_FILES = 10_000
ENGINE_MODES = ("lexical", "reranked", "fused", "fused-norerank", "meaning")
#: the modes that rank by meaning (the `assern[semantic]` extra's vectors)
MEANING_MODES = ("fused", "fused-norerank", "meaning")
#: the engine's re-ranking signals, each ablated in a full run (assern.context.rank.SIGNALS)
SIGNALS = ("symbol", "path", "role")
RANKING_ENV = "ASSERN_CONTEXT_RANKING"
ABLATE_ENV = "ASSERN_CONTEXT_RERANK_DISABLE"
SMOKE_PROJECT = "click"
SMOKE_QUERIES = 8
INDEX_TIMEOUT_S = 900.0
FRESH_TIMEOUT_S = 30.0


@attrs.frozen
class Query:
    project: str
    kind: str
    text: str
    files: tuple[str, ...] = attrs.field(converter=tuple)
    few_shared_words: bool = False


def load_queries(path: Path = HERE / "queries.toml") -> list[Query]:
    return [Query(**raw) for raw in tomllib.loads(path.read_text())["query"]]


#: the questions of the held-out projects (corpus.toml's `heldout = true`)
HELDOUT_QUERIES = HERE / "heldout.toml"
PARTS = ("tuned", "heldout")


def misplaced(
    projects: Sequence[corpus.Project], tuned: Sequence[Query], heldout: Sequence[Query]
) -> list[str]:
    """Questions asked in the wrong part: a tuned question in a held-out project, a
    held-out one in a tuned project, or either in a project corpus.toml lacks."""
    held = {p.name: p.heldout for p in projects}
    wrong = [f"queries.toml asks {q.text!r} of {q.project}, which is held out"
             for q in tuned if held.get(q.project, False)]  # fmt: skip
    wrong += [f"heldout.toml asks {q.text!r} of {q.project}, which is not held out"
              for q in heldout if not held.get(q.project, True)]  # fmt: skip
    wrong += [f"{q.project} (asked {q.text!r}) is not in corpus.toml"
              for q in [*tuned, *heldout] if q.project not in held]  # fmt: skip
    return wrong


def split_parts(
    projects: Sequence[corpus.Project], names: Sequence[str], parts: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The named projects of the chosen parts: (tuned, held out), never one in both."""
    held = {p.name for p in projects if p.heldout}
    tuned = [n for n in names if n not in held] if "tuned" in parts else []
    return tuned, [n for n in names if n in held] if "heldout" in parts else []


# ------------------------------------------------------------------ scoring a ranking


@attrs.frozen
class Answer:
    """One ranking's files for one query, and how long the ranking took."""

    files: tuple[str, ...]
    ms: float


def scored(queries: Sequence[Query], answers: Sequence[Answer]) -> dict[str, Any]:
    """NDCG@10 and Recall@5 averaged over all queries, per project, per kind and over the
    few-shared-words queries, with each query's answer."""

    def mean_of(pick: Callable[[Query], bool]) -> dict[str, Any]:
        chosen = [(q, a) for q, a in zip(queries, answers, strict=True) if pick(q)]
        if not chosen:
            return {"queries": 0}
        return {
            "queries": len(chosen),
            "ndcg@10": round(sum(scoring.ndcg(a.files, q.files, 10) for q, a in chosen) / len(chosen), 4),
            "recall@5": round(sum(scoring.recall(a.files, q.files, 5) for q, a in chosen) / len(chosen), 4),
        }

    return {
        "all": mean_of(lambda q: True),
        "projects": {p: mean_of(lambda q, p=p: q.project == p) for p in sorted({q.project for q in queries})},
        "kinds": {k: mean_of(lambda q, k=k: q.kind == k) for k in sorted({q.kind for q in queries})},
        "few_shared_words": mean_of(lambda q: q.few_shared_words),
        "query_ms_p95": round(scoring.percentile([a.ms for a in answers], 0.95), 3),
        "answers": [
            {"project": q.project, "text": q.text, "files": list(a.files[:TOP_K])}
            for q, a in zip(queries, answers, strict=True)
        ],
    }


def by_project(queries: Sequence[Query]) -> dict[str, list[Query]]:
    grouped: dict[str, list[Query]] = {}
    for query in queries:
        grouped.setdefault(query.project, []).append(query)
    return grouped


# ------------------------------------------------------------------ the baselines


def bm25_answers(root: Path, queries: Sequence[Query]) -> tuple[list[Answer], float]:
    """BM25 over the root's whole files; also the index's build time in seconds."""
    started = time.perf_counter()
    index = scoring.BM25.build(scoring.read_text_files(root))
    built = time.perf_counter() - started
    answers = []
    for query in queries:
        started = time.perf_counter()
        ranked = [name for name, _ in index.search(query.text, TOP_K)]
        answers.append(Answer(tuple(ranked), (time.perf_counter() - started) * 1000))
    return answers, built


def find_rg() -> str | None:
    """ripgrep's `rg`: beside this interpreter (the `ripgrep` wheel installs it in the
    environment's bin/) or on PATH."""
    beside = Path(sys.executable).parent / "rg"
    return str(beside) if beside.exists() else shutil.which("rg")


def rg_counts(rg: str, root: Path, words: Sequence[str]) -> dict[str, int]:
    """Matches of any of the words (case-insensitive, literal) per file, every file
    searched (no ignore files, hidden files too; rg skips binary files itself)."""
    command = [rg, "--count-matches", "--ignore-case", "--fixed-strings", "--no-ignore", "--hidden",
               "--no-messages", "--with-filename", "--max-filesize", "1M"]  # fmt: skip
    for word in words:
        command += ["-e", word]
    done = subprocess.run([*command, "."], cwd=root, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: no match
        raise RuntimeError(f"rg failed ({done.returncode}): {done.stderr.strip()}")
    counts = {}
    for line in done.stdout.splitlines():
        name, _, count = line.rpartition(":")
        counts[name.removeprefix("./")] = int(count)
    return counts


def python_counts(files: dict[str, str], words: Sequence[str]) -> dict[str, int]:
    """The same counts as rg_counts, in Python (non-overlapping case-insensitive matches)."""
    lowered = [w.lower() for w in words]
    counts = {}
    for name, text in files.items():
        low = text.lower()
        counts[name] = sum(low.count(word) for word in lowered)
    return counts


def grep_answers(root: Path, queries: Sequence[Query], rg: str | None) -> list[Answer]:
    files = None if rg else scoring.read_text_files(root)
    answers = []
    for query in queries:
        words = scoring.grep_words(query.text)
        started = time.perf_counter()
        if not words:
            counts: dict[str, int] = {}
        elif rg:
            counts = rg_counts(rg, root, words)
        else:
            assert files is not None
            counts = python_counts(files, words)
        ranked = scoring.rank_by_counts(counts, TOP_K)
        answers.append(Answer(tuple(ranked), (time.perf_counter() - started) * 1000))
    return answers


# ------------------------------------------------------------------ the engine


def engine_importable() -> bool:
    try:
        return importlib.util.find_spec("assern.context") is not None
    except ModuleNotFoundError:
        return False


def semantic_importable() -> bool:
    return importlib.util.find_spec("wordllama") is not None


def _read_proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text(errors="replace")
    except OSError:
        return ""


def process_tree(root_pid: int) -> list[int]:
    """root_pid and every process below it (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _read_proc(int(entry), "stat").rpartition(")")[2].split()
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def rss_mb(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        for line in _read_proc(pid, "status").splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return round(total / 1024, 1)


def peak_rss_mb(pid: int) -> float | None:
    """The engine process's peak resident memory so far (VmHWM), in MB."""
    for line in _read_proc(pid, "status").splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def engine_pid(root: Path) -> int | None:
    """The engine serving root: the child of this process whose command line names it."""
    mine = str(os.getpid())
    for pid in process_tree(os.getpid())[1:]:
        argv = _read_proc(pid, "cmdline").split("\0")
        stat = _read_proc(pid, "stat").rpartition(")")[2].split()
        if len(stat) > 1 and stat[1] == mine and str(root) in argv:
            return pid
    return None


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


@attrs.frozen
class Engine:
    """How to start the engine: its command (before `--root ROOT`) and extra environment."""

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def environment(self, home: Path, mode: str | None) -> dict[str, str]:
        env = {**os.environ, "ASSERN_HOME": str(home), **dict(self.env)}
        env.pop(RANKING_ENV, None)
        if mode:
            env[RANKING_ENV] = mode
        return env


@contextlib.asynccontextmanager
async def engine_session(engine: Engine, root: Path, home: Path, mode: str | None) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=engine.command[0],
        args=[*engine.command[1:], "--root", str(root)],
        env=engine.environment(home, mode),
    )
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        yield client


class EngineError(Exception):
    pass


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise EngineError(f"{tool} {arguments!r} failed: {text or 'no structuredContent'}")
    content: dict[str, Any] = result.structured_content
    return content


async def wait_indexed(client: Any, limit: float = INDEX_TIMEOUT_S) -> dict[str, Any]:
    """Poll until the index reports nothing pending; its last `index` object."""
    with trio.fail_after(limit):
        while True:
            found = await call(client, "semantic_search", {"query": "index", "top_k": 1})
            index: dict[str, Any] = found["index"]
            if index["pending"] == 0 and index["files"] > 0:
                return index
            await trio.sleep(0.05)


async def ask(client: Any, query: str) -> Answer:
    started = time.perf_counter()
    found = await call(client, "semantic_search", {"query": query, "top_k": TOP_K})
    ms = (time.perf_counter() - started) * 1000
    return Answer(tuple(scoring.files_in_order(r["path"] for r in found["results"])), ms)


@attrs.frozen
class Bundle:
    """One `get_context_for_prompt` answer: whether it holds a labelled file, how long it
    took, and its size in tokens as the client got it (the larger of its text content
    and its compact `structuredContent` JSON, at 4 bytes a token)."""

    hit: bool
    ms: float
    tokens: int


def answer_tokens(texts: Sequence[str], structured: dict[str, Any]) -> int:
    """The tokens of an answer as a client may hand it to the model, in either form."""
    text = "\n".join(texts).encode("utf-8", "surrogatepass")
    data = json.dumps(structured, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return -(-max(len(text), len(data)) // BYTES_PER_TOKEN)


async def bundle_hit(client: Any, query: Query) -> Bundle:
    started = time.perf_counter()
    result = await client.call_tool(
        "get_context_for_prompt", {"query": query.text, "max_tokens": BUNDLE_TOKENS}
    )
    ms = (time.perf_counter() - started) * 1000
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise EngineError(f"get_context_for_prompt {query.text!r} failed: {text or 'no structuredContent'}")
    found: dict[str, Any] = result.structured_content
    tokens = answer_tokens([getattr(c, "text", "") for c in result.content], found)
    return Bundle(bool({f["path"] for f in found["files"]} & set(query.files)), ms, tokens)


def bundle_figures(bundles: Sequence[Bundle]) -> dict[str, Any]:
    """The bundles' hit rate, latency, and how many went over their budget."""
    return {
        "bundle_hit_rate": round(sum(b.hit for b in bundles) / len(bundles), 4),
        "bundle_ms_p95": round(scoring.percentile([b.ms for b in bundles], 0.95), 3),
        "bundle_tokens_max": max(b.tokens for b in bundles),
        "bundles_over_budget": sum(b.tokens > BUNDLE_TOKENS for b in bundles),
    }


async def engine_quality(
    engine: Engine, root: Path, queries: Sequence[Query], mode: str, work: Path
) -> dict[str, Any]:
    """One project in one mode from a cold index: the answers, bundle hits, index time,
    RSS and database size."""
    home = Path(tempfile.mkdtemp(prefix=f"home-{mode}-", dir=work))
    started = time.perf_counter()
    async with engine_session(engine, root, home, mode) as client:
        index = await wait_indexed(client)
        cold = time.perf_counter() - started
        answers = [await ask(client, q.text) for q in queries]
        hits = [await bundle_hit(client, q) for q in queries]
        pid = engine_pid(root)
        memory = rss_mb(process_tree(pid)) if pid else None
    return {
        "answers": answers,
        "bundle_hits": hits,
        "cold_index_s": round(cold, 3),
        "files": index["files"],
        "rss_mb": memory,
        "db_bytes": folder_bytes(home / "cache" / "context"),
    }


def distinct_copy(source: Path, target: Path, copy: int) -> None:
    """source's file at target, a text file made distinct from its other copies by a
    trailing comment (so no index can share one copy's work with another)."""
    data = source.read_bytes()
    if b"\0" not in data[:8192]:
        data += f"\n# copy {copy}\n".encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def synthetic_tree(roots: Sequence[Path], target: Path, files: int) -> int:
    """A tree of `files` files: copies c1, c2, ... of the corpus roots, file by file."""
    sources = [(root, path) for root in roots for path in sorted(root.rglob("*")) if path.is_file()]
    made = 0
    copy = 0
    while made < files:
        copy += 1
        for root, path in sources:
            if made == files:
                break
            distinct_copy(path, target / f"c{copy}" / root.name / path.relative_to(root), copy)
            made += 1
    return made


async def searchable_after(client: Any, root: Path, edits: int) -> list[float]:
    """Milliseconds from each saved file to the first search that returns it: new files
    and edits of existing ones in turn, each with a word no other file has."""
    existing = sorted(p for p in root.rglob("*.py") if p.is_file())  # noqa: ASYNC240 - once, before timing
    delays = []
    for n in range(edits):
        word = f"zqfresh{n}x{os.getpid()}"
        if n % 2 == 0 or not existing:
            path = root / "fresh" / f"fresh_{n}.py"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"def {word}():\n    return {n}\n")
        else:
            path = existing[n % len(existing)]
            with path.open("a") as stream:
                stream.write(f"\n\ndef {word}():\n    return {n}\n")
        saved = time.perf_counter()
        relative = path.relative_to(root).as_posix()
        with trio.fail_after(FRESH_TIMEOUT_S):
            while True:
                found = await call(client, "semantic_search", {"query": word, "top_k": 5})
                if any(r["path"] == relative for r in found["results"]):
                    break
                await trio.sleep(0.01)
        delays.append((time.perf_counter() - saved) * 1000)
    return delays


async def engine_operations(
    engine: Engine,
    root: Path,
    queries: Sequence[Query],
    edits: int,
    work: Path,
    index_timeout: float = INDEX_TIMEOUT_S,
) -> dict[str, Any]:
    """Cold index, warm restart, freshness, query latency, RSS and database size of one
    tree (a copy the bench may write into), in the engine's default mode."""
    home = Path(tempfile.mkdtemp(prefix="home-ops-", dir=work))
    started = time.perf_counter()
    async with engine_session(engine, root, home, None) as client:
        index = await wait_indexed(client, index_timeout)
        cold = time.perf_counter() - started
        latencies = [(await ask(client, q.text)).ms for q in queries]
        pid = engine_pid(root)
        memory = rss_mb(process_tree(pid)) if pid else None
        peak = peak_rss_mb(pid) if pid else None
    db = folder_bytes(home / "cache" / "context")
    started = time.perf_counter()
    async with engine_session(engine, root, home, None) as client:
        await wait_indexed(client)
        warm = time.perf_counter() - started
        fresh = await searchable_after(client, root, edits)
    return {
        "files": index["files"],
        "cold_index_s": round(cold, 3),
        "warm_restart_s": round(warm, 3),
        "searchable_after_ms_p95": round(scoring.percentile(fresh, 0.95), 1),
        "searchable_after_ms": [round(d, 1) for d in fresh],
        "query_ms_p95": round(scoring.percentile(latencies, 0.95), 3),
        "rss_mb": memory,
        "rss_peak_mb": peak,
        "db_bytes": db,
        "db_mb_per_10k_files": round(db / 2**20 * 10_000 / index["files"], 1),
    }


# ------------------------------------------------------------------ the run


def quality(
    queries: Sequence[Query],
    roots: dict[str, Path],
    engine: Engine | None,
    modes: Sequence[str],
    work: Path,
) -> dict[str, Any]:
    grouped = by_project(queries)
    ordered = [q for project in grouped for q in grouped[project]]
    report: dict[str, Any] = {"queries": len(ordered), "projects": {}}
    bm25: list[Answer] = []
    grep: list[Answer] = []
    rg = find_rg()
    for project, asked in grouped.items():
        answers, built = bm25_answers(roots[project], asked)
        bm25 += answers
        grep += grep_answers(roots[project], asked, rg)
        report["projects"][project] = {"queries": len(asked), "bm25_build_s": round(built, 3)}
    report["bm25"] = scored(ordered, bm25)
    report["ripgrep"] = scored(ordered, grep)
    report["ripgrep"]["tool"] = "rg " + rg_version(rg) if rg else "python (no rg found)"
    for mode in modes:
        if engine is None:
            report[f"engine {mode}"] = {"n/a": "engine not installed"}
            continue
        if mode in MEANING_MODES and not semantic_importable():
            report[f"engine {mode}"] = {"n/a": "semantic extra not installed"}
            continue
        answers, hits, per_project = [], [], {}
        for project, asked in grouped.items():
            found = trio.run(engine_quality, engine, roots[project], asked, mode, work)
            answers += found.pop("answers")
            hits += found.pop("bundle_hits")
            per_project[project] = found
        report[f"engine {mode}"] = {**scored(ordered, answers), **bundle_figures(hits), "index": per_project}
    return report


#: (what, with, without): each step's contribution is row `with` minus row `without`
STEPS = (
    ("re-ranking, on the words alone", "engine reranked", "engine lexical"),
    ("re-ranking, on words and meaning fused", "engine fused", "engine fused-norerank"),
    ("meaning fused in, without re-ranking", "engine fused-norerank", "engine lexical"),
    ("meaning fused in, with re-ranking", "engine fused", "engine reranked"),
    ("meaning alone against the words alone", "engine meaning", "engine lexical"),
)


def contributions(quality: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Each ranking step's worth as the difference of two rows measured in this run:
    the re-ranking, the meaning, and each re-ranking signal (re-ranked less that signal)."""
    steps = list(STEPS)
    steps += [
        (f"signal {name[len('engine -') :]} (re-ranked less it)", "engine reranked", name)
        for name in quality
        if name.startswith("engine -")
    ]
    found: dict[str, dict[str, float | None]] = {}
    for what, with_, without in steps:
        a, b = quality.get(with_), quality.get(without)
        if not a or not b or "n/a" in a or "n/a" in b:
            continue
        bundle = None
        if a.get("bundle_hit_rate") is not None and b.get("bundle_hit_rate") is not None:
            bundle = round(a["bundle_hit_rate"] - b["bundle_hit_rate"], 4)
        found[what] = {
            "ndcg@10": round(a["all"]["ndcg@10"] - b["all"]["ndcg@10"], 4),
            "recall@5": round(a["all"]["recall@5"] - b["all"]["recall@5"], 4),
            "bundle": bundle,
        }
    return found


def rg_version(rg: str) -> str:
    done = subprocess.run([rg, "--version"], capture_output=True, text=True)
    return done.stdout.split()[1] if done.returncode == 0 and done.stdout else "?"


def operations(
    queries: Sequence[Query], roots: dict[str, Path], engine: Engine, tree: Path | None, work: Path
) -> dict[str, Any]:
    """Per project (a writable copy), and the synthetic tree when there is one."""
    found = {}
    for project, root in roots.items():
        copy = work / "trees" / project
        shutil.copytree(root, copy)
        asked = [q for q in queries if q.project == project]
        found[project] = trio.run(engine_operations, engine, copy, asked, 10 if tree else 3, work)
    if tree:
        found[f"synthetic {SCALE_FILES} files"] = trio.run(engine_operations, engine, tree, queries, 20, work)
    return found


def baselines_at_scale(tree: Path, queries: Sequence[Query]) -> dict[str, Any]:
    """The baselines over the synthetic tree: BM25's build time and both query p95s."""
    bm25, built = bm25_answers(tree, queries)
    rg = find_rg()
    grep = grep_answers(tree, queries, rg)
    return {
        "files": sum(1 for p in tree.rglob("*") if p.is_file()),
        "bm25_build_s": round(built, 3),
        "bm25_query_ms_p95": round(scoring.percentile([a.ms for a in bm25], 0.95), 3),
        "ripgrep_query_ms_p95": round(scoring.percentile([a.ms for a in grep], 0.95), 3),
    }


# ------------------------------------------------------------------ the table


def print_report(report: dict[str, Any]) -> None:
    q = report.get("quality")
    if q is not None:
        print_quality(report, q)
    held = report.get("heldout")
    if held is not None:
        print("\n" + "=" * 22 + " held-out projects: never looked at while the ranking was tuned")
        print_quality(held, held["quality"])
    ops = report.get("operations")
    if isinstance(ops, dict):
        print("\nengine operations (default ranking)")
        print(f"{'tree':<24} {'files':>6} {'cold s':>7} {'warm s':>7} {'fresh p95 ms':>13} "
              f"{'q p95 ms':>9} {'RSS MB':>7} {'DB MB/10k':>10}")  # fmt: skip
        for tree, row in ops.items():
            print(f"{tree:<24} {row['files']:>6} {row['cold_index_s']:>7.2f} {row['warm_restart_s']:>7.2f} "
                  f"{row['searchable_after_ms_p95']:>13.1f} {row['query_ms_p95']:>9.2f} "
                  f"{row['rss_mb']!s:>7} {row['db_mb_per_10k_files']:>10}")  # fmt: skip
        peaks = ", ".join(f"{tree} {row.get('rss_peak_mb')}" for tree, row in ops.items())
        print(f"peak RSS MB of the engine (cold run): {peaks}")
        for name, row in (q or {}).items():
            if name.startswith("engine ") and "index" in row:
                cold = ", ".join(f"{p} {r['cold_index_s']:.2f}" for p, r in row["index"].items())
                print(f"cold index s, {name}: {cold}")
    elif ops:
        print(f"\nengine operations: {ops}")


def print_quality(report: dict[str, Any], q: dict[str, Any]) -> None:
    projects = list(q["projects"])
    print(f"\nranking quality: {q['queries']} queries over {', '.join(projects)} (file level)")
    head = f"{'ranking':<22} {'NDCG@10':>8} {'Recall@5':>9} {'few-words':>10} {'bundle':>7} {'q p95 ms':>9}"
    print(head + "".join(f" {p[:8]:>8}" for p in projects))
    for name in ("bm25", "ripgrep", *(k for k in q if k.startswith("engine "))):
        row = q[name]
        if "n/a" in row:
            print(f"{name:<22} n/a ({row['n/a']})")
            continue
        few = _cell(row["few_shared_words"].get("ndcg@10"), 10)
        bundle = _cell(row.get("bundle_hit_rate"), 7)
        line = f"{name:<22} {row['all']['ndcg@10']:>8.3f} {row['all']['recall@5']:>9.3f} {few} "
        line += f"{bundle} {row['query_ms_p95']:>9.2f}"
        print(line + "".join(f" {row['projects'][p]['ndcg@10']:>8.3f}" for p in projects))
    kinds = list(q["bm25"]["kinds"])
    print("\nNDCG@10 by kind of question")
    print(f"{'ranking':<22}" + "".join(f" {k[:12]:>12}" for k in kinds))
    for name in ("bm25", "ripgrep", *(k for k in q if k.startswith("engine "))):
        if "n/a" not in q[name]:
            print(f"{name:<22}" + "".join(f" {q[name]['kinds'][k]['ndcg@10']:>12.3f}" for k in kinds))
    contributions = report.get("contributions")
    if contributions:
        print("\nwhat each step brings (differences between rows of this run)")
        print(f"{'step':<46} {'NDCG@10':>8} {'Recall@5':>9} {'bundle':>7}")
        for name, row in contributions.items():
            bundle = f"{row['bundle']:>+7.3f}" if row.get("bundle") is not None else f"{'-':>7}"
            print(f"{name:<46} {row['ndcg@10']:>+8.3f} {row['recall@5']:>+9.3f} {bundle}")
    print("(few-words: NDCG@10 on the queries written without their answer's words; bundle: share of")
    print(f" queries with a labelled file in a {BUNDLE_TOKENS}-token get_context_for_prompt bundle)")
    for name in (k for k in q if k.startswith("engine ") and "bundle_ms_p95" in q[k]):
        row = q[name]
        print(f"bundles, {name}: p95 {row['bundle_ms_p95']:.2f} ms, largest answer "
              f"{row['bundle_tokens_max']} tokens, {row['bundles_over_budget']} of {q['queries']} "
              f"over {BUNDLE_TOKENS}")  # fmt: skip
    print(f"ripgrep baseline: {q['ripgrep']['tool']}")
    scale = report.get("baselines_at_scale")
    if scale:
        print(f"\nbaselines over the synthetic tree ({scale['files']} files): BM25 build "
              f"{scale['bm25_build_s']:.2f} s, query p95 {scale['bm25_query_ms_p95']:.2f} ms; "
              f"ripgrep query p95 {scale['ripgrep_query_ms_p95']:.2f} ms")  # fmt: skip


def _cell(value: float | None, width: int) -> str:
    return f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}"


def parse_engine(args: argparse.Namespace) -> Engine | None:
    if args.no_engine:
        return None
    env = []
    for pair in args.engine_env:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--engine-env wants KEY=VALUE, not {pair!r}")
        env.append((key, value))
    if args.engine:
        return Engine(tuple(shlex.split(args.engine)), tuple(env))
    if not engine_importable():
        return None
    return Engine((sys.executable, "-I", "-m", "assern.context"), tuple(env))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write every figure (and each query's answers) here")
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_PROJECT} only, {SMOKE_QUERIES} queries")
    parser.add_argument("--project", action="append", default=[], help="only this project (repeatable)")
    parser.add_argument("--mode", action="append", choices=ENGINE_MODES, help="engine modes (default: all)")
    parser.add_argument("--no-engine", action="store_true", help="the baselines only")
    parser.add_argument("--no-operations", action="store_true", help="ranking quality only")
    parser.add_argument(
        "--engine", help="the engine's command before `--root ROOT` (default: python -I -m assern.context)"
    )
    parser.add_argument(
        "--engine-env", action="append", default=[], help="KEY=VALUE for the engine (repeatable)"
    )
    parser.add_argument("--ablate", action="append", default=[], metavar="SIGNAL",
                        help=f"also run `reranked` with {ABLATE_ENV}=SIGNAL (repeatable; "
                             f"default without --mode or --smoke: each of {', '.join(SIGNALS)})")  # fmt: skip
    parser.add_argument("--part", action="append", choices=PARTS,
                        help="tuned: the projects the ranking was tuned on; heldout: those of "
                             "heldout.toml, apart (default: both; --smoke, --files: tuned)")  # fmt: skip
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (trees, databases)")
    parser.add_argument("--files", type=int, metavar="N",
                        help="only the engine's operations over a synthetic tree of N files "
                             "(no ranking quality, no per-project runs; e.g. 100000)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.files is not None and args.files < 1:
        parser.error("--files must be at least 1")

    queries, held = load_queries(), load_queries(HELDOUT_QUERIES)
    known = {p.name: p for p in corpus.projects()}
    wrong = misplaced(list(known.values()), queries, held)
    if wrong:
        parser.error("; ".join(wrong))
    names = [SMOKE_PROJECT] if args.smoke else args.project or list(known)
    unknown = set(names) - set(known)
    if unknown:
        parser.error(f"not in corpus.toml: {', '.join(sorted(unknown))}")
    parts = ["tuned"] if args.smoke or args.files is not None else args.part or list(PARTS)
    names, held_names = split_parts(list(known.values()), names, parts)
    queries = [q for q in queries if q.project in names]
    held = [q for q in held if q.project in held_names]
    if args.smoke:
        queries = queries[:SMOKE_QUERIES]
    if not names and not held_names:
        parser.error(f"no project of the part(s) {', '.join(parts)} among {', '.join(args.project)}")
    try:
        roots = {name: corpus.ensure(known[name]) for name in names}
        held_roots = {name: corpus.ensure(known[name]) for name in held_names}
    except corpus.CorpusError as error:
        print(f"corpus: {error}", file=sys.stderr)
        return 1
    engine = parse_engine(args)
    modes = args.mode or (["reranked"] if args.smoke else list(ENGINE_MODES))
    work = Path(args.keep or tempfile.mkdtemp(prefix="assern-context-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.files is not None:
        return scale_only(args, queries, roots, engine, work)
    ablate = args.ablate or ([] if args.smoke or args.mode else list(SIGNALS))
    report: dict[str, Any] = {}
    if names:
        report["corpus"] = {p: f"{known[p].name}=={known[p].version}" for p in names}
        report["quality"] = ranked_and_ablated(queries, roots, engine, modes, ablate, work)
        report["contributions"] = contributions(report["quality"])
    if held_names:
        found = ranked_and_ablated(held, held_roots, engine, modes, ablate, work)
        report["heldout"] = {
            "corpus": {p: f"{known[p].name}=={known[p].version}" for p in held_names},
            "quality": found,
            "contributions": contributions(found),
        }
    tree = None
    if names and not args.no_operations and not args.smoke:
        tree = work / "trees" / f"synthetic-{SCALE_FILES}"
        synthetic_tree(list(roots.values()), tree, SCALE_FILES)
        report["baselines_at_scale"] = baselines_at_scale(tree, queries)
    if args.no_operations or not names:
        pass
    elif engine is None:
        report["operations"] = "n/a (engine not installed)"
    else:
        report["operations"] = operations(queries, roots, engine, tree, work)
    return finish(args, report, work)


def ranked_and_ablated(
    queries: Sequence[Query],
    roots: dict[str, Path],
    engine: Engine | None,
    modes: Sequence[str],
    ablate: Sequence[str],
    work: Path,
) -> dict[str, Any]:
    """Every ranking's quality over these queries, then `reranked` less each signal."""
    found = quality(queries, roots, engine, modes, work)
    if engine is not None:
        for signal in ablate:
            ablated = attrs.evolve(engine, env=(*engine.env, (ABLATE_ENV, signal)))
            row = quality(queries, roots, ablated, ["reranked"], work)["engine reranked"]
            found[f"engine -{signal}"] = row
    return found


def finish(args: argparse.Namespace, report: dict[str, Any], work: Path) -> int:
    """Print (and with --json write) the report; the work folder goes unless --keep."""
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def scale_only(
    args: argparse.Namespace,
    queries: Sequence[Query],
    roots: dict[str, Path],
    engine: Engine | None,
    work: Path,
) -> int:
    """`--files N`: the operations over a synthetic tree of N files, nothing else."""
    if engine is None:
        print("--files: the engine is not installed", file=sys.stderr)
        return 1
    tree = work / "trees" / f"synthetic-{args.files}"
    started = time.perf_counter()
    synthetic_tree(list(roots.values()), tree, args.files)
    made = time.perf_counter() - started
    print(f"synthetic tree of {args.files} files made in {made:.1f} s", file=sys.stderr)
    # a tenth of a second a file at most, for a loaded machine
    row = trio.run(engine_operations, engine, tree, queries, 20, work, max(INDEX_TIMEOUT_S, args.files / 10))
    report = {"operations": {f"synthetic {args.files} files": row}}
    return finish(args, report, work)


if __name__ == "__main__":
    sys.exit(main())
