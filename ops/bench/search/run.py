"""The tool search benchmark: recall on real tools, answer size, speed at 10,000 tools.

    .venv/bin/python ops/bench/search/run.py                 # everything (about 2 minutes)
    .venv/bin/python ops/bench/search/run.py --json out.json # also every figure as JSON
    .venv/bin/python ops/bench/search/run.py --smoke         # recall and a small scale run
    .venv/bin/python ops/bench/search/run.py --smoke --candidates 20 --candidates 50
                                                             # the blend's depth, compared

Recall: the tools of the real MCP servers of fixtures/ (captured by capture.py) form
one catalog as assern builds it; each labelled query (labels.py: queries.toml, the
project's own set, and tasks.toml, tasks taken from the servers' READMEs) is searched.
Recall@k is the share of a query's needs (one for a step, one per step for a whole
task) with a right tool among the first k; MRR the mean of 1/rank of each need's first
right tool (0 past 10); all@5 the share of queries with every need in the first 5.
Figures are given per kind (tasks, steps), set (own, readme) and part of the held-out
split (split.toml: tuning, heldout, both). Plain is textbook BM25 (plain.py), lexical
assern's BM25F, semantic the cosine ranking alone (the `assern[semantic]` extra),
blended the words' best re-weighed by meaning (what search_tools does with the extra),
fused both by reciprocal rank fusion (what it did before the blend). On the parts
the targets are read on (held-out steps, held-out whole tasks of the readme set), each
ranking's Recall@5 also gets its 95% interval and a query-by-query comparison with
plain BM25 (spread.py).
`--candidates N` (repeatable) also ranks blended with the meaning re-weighing the best N
by words (assern re-weighs `semantic.CANDIDATES`). See docs/search-evaluation.md.

Size: the estimated tokens (views.estimate_tokens) of the full tools/list, of the
search-exposure tools/list, and of search_tools' answers.

Scale: the real catalog copied to 10,000 tools (fixture_server.load_tools); indexing
time, query latency in process, the index's memory (tracemalloc), the memory of one
compiled argument validator (the C heap in use, by glibc's mallinfo2, over compiling
every tool's inputSchema as the gate does on a tool's first call: jsonschema-rs
allocates outside Python's tracemalloc), and search_tools
through a real `assern serve` over stdio against a tools/call of a trivial tool through
the same assern (the difference is what the search costs), with the process's memory
with and without the semantic extra's model loaded.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp import Client, StdioServerParameters

from assern.actors.gate.validation import InvalidSchema, compile_schema
from assern.actors.listener import exposure
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog, search_sources
from assern.actors.router.views import estimate_tokens
from assern.actors.search import semantic as sem
from assern.actors.search.index import SearchIndex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import plain  # noqa: E402
import spread  # noqa: E402
from labels import Query  # noqa: E402

KS = (1, 5, 10)
SCALE_TOOLS = 10_000


# ------------------------------------------------------------------ the catalog


def listings(paths: Sequence[Path], copies: int = 1) -> list[BackendListing]:
    """One listing per fixture (per copy of it, named SERVER_cN, for the large catalog)."""
    found = []
    for copy in range(1, copies + 1):
        for path in paths:
            fixture = json.loads(path.read_text())
            name = fixture["server"] if copy == 1 else f"{fixture['server']}_c{copy}"
            tools = tuple(types.Tool.model_validate(raw) for raw in fixture["tools"])
            found.append(BackendListing(server=name, tools=tools, instructions=fixture.get("instructions")))
    return found


def search_catalog(found: list[BackendListing]) -> Catalog:
    catalog = build_catalog(found, exposure="search")
    return attrs.evolve(catalog, search=SearchIndex().updated(search_sources(found, catalog)))


def semantic_for(catalog: Catalog) -> sem.Semantic | None:
    if not sem.installed():
        return None
    embedder = sem.Embedder()
    routes = list(catalog.tools.values())
    keys = [sem.tool_key(r.server, r.original, r.tool) for r in routes]
    matrix = embedder.embed([sem.tool_text(r.original, r.tool) for r in routes])
    return sem.Semantic(embedder, sem.Vectors.empty().extended(keys, matrix))


# ------------------------------------------------------------------- recall


def queries(catalog: Catalog) -> list[Query]:
    exposed = {(route.server, route.original): name for name, route in catalog.tools.items()}
    return labels.read(exposed)


def fixture_catalog() -> tuple[Catalog, SearchIndex, list[Query]]:
    """The recorded fixtures' catalog (search exposure), its index and the labelled queries."""
    catalog = search_catalog(listings(sorted((HERE / "fixtures").glob("*.json"))))
    assert catalog.search is not None
    return catalog, catalog.search, queries(catalog)


Ranker = Callable[[str], list[str]]


def need_ranks(names: Sequence[str], query: Query) -> list[int | None]:
    """For each need of the query, the rank of its first right tool in `names` (or None)."""
    return [next((i for i, name in enumerate(names, start=1) if name in need), None) for need in query.needs]


def recall(ranker: Ranker, asked: Sequence[Query]) -> dict[str, float]:
    """Recall@k: the share of the needs found in the first k (a step has one need, a
    whole task one per step; each query weighs the same), MRR the mean of 1/rank of each
    need's first right tool (0 past 10), all@5 the share of queries with every need in
    the first 5."""
    shares: dict[int, list[float]] = {k: [] for k in KS}
    reciprocal, complete = [], []
    for query in asked:
        ranks = need_ranks(ranker(query.text)[:10], query)
        for k in KS:
            shares[k].append(sum(1 for r in ranks if r is not None and r <= k) / len(ranks))
        reciprocal.append(sum(1 / r for r in ranks if r is not None) / len(ranks))
        complete.append(all(r is not None and r <= 5 for r in ranks))
    count = max(len(asked), 1)
    figures = {f"recall@{k}": sum(shares[k]) / count for k in KS}
    figures["mrr"] = sum(reciprocal) / count
    figures["all@5"] = sum(complete) / count
    figures["queries"] = len(asked)
    return {key: round(value, 3) for key, value in figures.items()}


def found_at(ranker: Ranker, asked: Sequence[Query], k: int = 5) -> list[float]:
    """Query by query, the share of its needs found in the first k (their mean is Recall@k)."""
    shares = []
    for query in asked:
        ranks = need_ranks(ranker(query.text)[:k], query)
        shares.append(sum(1 for r in ranks if r is not None) / len(ranks))
    return shares


# The parts the targets are read on (docs/search-evaluation.md, "Against the targets").
TARGET_PARTS = {
    "held-out steps": lambda q, part: q.kind == "step" and part == "heldout",
    "held-out whole tasks (readme)": lambda q, part: (
        q.kind == "task" and q.source_set == "readme" and part == "heldout"
    ),
}


def spreads(answered: dict[str, Ranker], asked: Sequence[Query]) -> dict[str, dict[str, Any]]:
    """For each target part and ranking: Recall@5, its 95% interval, and query by query
    against plain BM25 (how many it finds more of, less of, the sign test's p)."""
    _seed, heldout, tuning = labels.read_split()
    figures: dict[str, dict[str, Any]] = {}
    for title, wanted in TARGET_PARTS.items():
        chosen = [q for q in asked if wanted(q, labels.part(q, heldout, tuning))]
        shares = {name: found_at(ranker, chosen) for name, ranker in answered.items()}
        figures[title] = {}
        for name, values in shares.items():
            low, high = spread.interval(values)
            entry: dict[str, Any] = {
                "queries": len(values),
                "recall@5": round(sum(values) / max(len(values), 1), 3),
                "low": round(low, 3),
                "high": round(high, 3),
            }
            if name != "plain" and "plain" in shares:
                entry["against plain"] = attrs.asdict(spread.paired(shares["plain"], values))
            figures[title][name] = entry
    return figures


def blended_at(index: SearchIndex, semantic: sem.Semantic, candidates: int) -> Ranker:
    """The blended ranking with the meaning re-weighing the best `candidates` by words."""

    def rank(query: str) -> list[str]:
        kept = sem.CANDIDATES
        sem.CANDIDATES = candidates  # read by blended_find and Semantic.compared at each call
        try:
            return [h.doc.name for h in sem.blended_find(index, semantic, query, limit=10).hits]
        finally:
            sem.CANDIDATES = kept

    return rank


#: the rank fusion the extra used before the blend: reciprocal rank fusion (Cormack,
#: Clarke & Buettcher 2009) of the words' and the meaning's best 20, the meaning at 0.5
RRF_K = 60
RRF_MEANING = 0.5


def fused_ranker(index: SearchIndex, semantic: sem.Semantic) -> Ranker:
    """The former `search_tools` with the extra: each tool scores the sum of weight /
    (60 + its rank) over the two rankings it is in; a tool named exactly comes first."""

    def rank(query: str) -> list[str]:
        lexical, _ = index.ranked(query, limit=sem.CANDIDATES)
        similar = semantic.ranked(index, query, None)
        scores: dict[str, float] = {}
        rankings = ((1.0, [doc for doc, _ in lexical]), (RRF_MEANING, [doc for doc, _ in similar]))
        for weight, ranking in rankings:
            for place, doc in enumerate(ranking, start=1):
                scores[doc.name] = scores.get(doc.name, 0.0) + weight / (RRF_K + place)
        exact = [doc.name for doc in index.exact(query.strip(), None)]
        fused = sorted(scores, key=lambda name: (name not in exact, -scores[name], name))
        return fused[:10]

    return rank


def plain_ranker(found: list[BackendListing], catalog: Catalog) -> Ranker:
    exposed = {(route.server, route.original): name for name, route in catalog.tools.items()}
    bm25 = plain.PlainBM25(
        (exposed[listing.server, tool.name], plain.tool_words(listing.server, tool.name, tool))
        for listing in found
        for tool in listing.tools
        if (listing.server, tool.name) in exposed
    )
    return lambda q: bm25.ranked(q, limit=10)


def rankers(
    found: list[BackendListing], catalog: Catalog, semantic: sem.Semantic | None
) -> dict[str, Ranker]:
    index = catalog.search
    assert index is not None
    rankings: dict[str, Ranker] = {
        "plain": plain_ranker(found, catalog),
        "lexical": lambda q: [h.doc.name for h in index.find(q, limit=10).hits],
    }
    if semantic is not None:
        rankings["semantic"] = lambda q: [doc.name for doc, _ in semantic.ranked(index, q, None)]
        rankings["blended"] = blended_at(index, semantic, sem.CANDIDATES)
        rankings["fused"] = fused_ranker(index, semantic)
    return rankings


def subsets(asked: Sequence[Query]) -> dict[str, list[Query]]:
    """Every query ("all both both"), then the queries by kind (tasks, steps), set
    (own, readme) and split part (both, tuning, heldout): "steps readme heldout" etc."""
    _seed, heldout, tuning = labels.read_split()
    parts = [labels.part(query, heldout, tuning) for query in asked]
    found: dict[str, list[Query]] = {"all both both": list(asked)}
    for kind in ("task", "step"):
        for source_set in ("own", "readme"):
            for name, wanted in (
                ("both", ("tuning", "heldout")),
                ("tuning", ("tuning",)),
                ("heldout", ("heldout",)),
            ):
                chosen = [
                    q
                    for q, p in zip(asked, parts, strict=True)
                    if q.kind == kind and q.source_set == source_set and p in wanted
                ]
                if chosen:
                    found[f"{kind}s {source_set} {name}"] = chosen
    return found


# --------------------------------------------------------------------- size


def sizes(found: list[BackendListing], catalog: Catalog, asked: Sequence[Query]) -> dict[str, Any]:
    full = estimate_tokens(build_catalog(found).tools_json)
    listed = estimate_tokens(catalog.tools_json)
    answers = []
    for query in asked:
        result = exposure.search(catalog, {"query": query.text}, [])
        answers.append(estimate_tokens(result.model_dump_json(by_alias=True, exclude_none=True)))
    median = statistics.median(answers)
    return {
        "tools": len(catalog.tools),
        "full_list_tokens": full,
        "search_list_tokens": listed,
        "answer_tokens_median": median,
        "answer_tokens_max": max(answers),
        "answer_to_full_ratio": round(median / full, 4),
    }


# -------------------------------------------------------------------- scale


def timed(action: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return times, result


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def scale(paths: Sequence[Path], asked: Sequence[Query], target: int, with_semantic: bool) -> dict[str, Any]:
    per_copy = sum(len(json.loads(p.read_text())["tools"]) for p in paths)
    copies = max(1, round(target / per_copy))
    found = listings(paths, copies)
    catalog = build_catalog(found, exposure="search")
    sources = search_sources(found, catalog)
    validator_kb = validator_memory_kb(found)
    build_times, index = timed(lambda: SearchIndex().updated(sources), 3)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = SearchIndex().updated(sources)
    for query in asked:  # the per-term score caches a warm index holds
        kept.find(query.text)
    memory = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    one = [s if s.server != found[0].server else attrs.evolve(s, tools=s.tools[:-1]) for s in sources]
    update_times, _ = timed(lambda: kept.updated(one), 3)
    latencies = []
    for _ in range(3):
        for query in asked:
            started = time.perf_counter()
            kept.find(query.text)
            latencies.append(time.perf_counter() - started)
    figures: dict[str, Any] = {
        "tools": index.total,
        "servers": len(found),
        "index_build_s": round(statistics.median(build_times), 3),
        "one_server_update_ms": round(statistics.median(update_times) * 1000, 2),
        "index_memory_mb": round(memory / 2**20, 1),
        "validator_kb": validator_kb,
        "lexical_query_ms_median": round(statistics.median(latencies) * 1000, 3),
        "lexical_query_ms_p99": round(percentile(latencies, 0.99) * 1000, 3),
    }
    if with_semantic and sem.installed():
        semantic_catalog = attrs.evolve(catalog, search=kept)
        embed_times, semantic = timed(lambda: semantic_for(semantic_catalog), 1)
        assert semantic is not None
        blended = []
        for query in asked:
            started = time.perf_counter()
            sem.blended_find(kept, semantic, query.text)
            blended.append(time.perf_counter() - started)
        figures["embed_all_s"] = round(embed_times[0], 2)
        figures["blended_query_ms_median"] = round(statistics.median(blended) * 1000, 3)
        figures["blended_query_ms_p99"] = round(percentile(blended, 0.99) * 1000, 3)
    return figures


class _MallInfo2(ctypes.Structure):
    #: glibc's struct mallinfo2, in its order
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks")
    ] + [("fordblks", ctypes.c_size_t), ("keepcost", ctypes.c_size_t)]


def c_heap_bytes() -> int | None:
    """Bytes the C heap holds in use (glibc's mallinfo2: where jsonschema-rs allocates),
    or None without glibc 2.33+."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


def validator_memory_kb(found: Sequence[BackendListing]) -> float:
    """The memory one compiled argument validator holds: the C heap in use (else the
    process's RSS) over compiling every tool's inputSchema as the gate does on a tool's
    first call (each schema its own object, as each backend's listing holds its own),
    divided by their number."""
    schemas = [tool.input_schema for listing in found for tool in listing.tools]
    gc.collect()
    heap, rss = c_heap_bytes(), rss_mb(os.getpid(), digits=3)
    kept = []
    for schema in schemas:
        try:
            kept.append(compile_schema(schema))
        except InvalidSchema:
            continue
    after = c_heap_bytes()
    grown = (after - heap) / 1024 if heap is not None and after is not None else None
    if grown is None:
        grown = (rss_mb(os.getpid(), digits=3) - rss) * 1024
    return round(grown / len(kept), 1) if kept else 0.0


# ------------------------------------------------------------ through assern


def rss_mb(pid: int, digits: int = 1) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, digits)
    return 0.0


def assern_setup(paths: Sequence[Path], copies: int, semantic: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment of an `assern serve` over the large catalog."""
    work = Path(tempfile.mkdtemp(prefix="assern-search-bench-"))
    fixtures = ", ".join(f'"{p}"' for p in paths)
    config = work / "config.toml"
    config.write_text(
        f'[settings]\nexposure = "search"\n\n[settings.search]\nsemantic = "{semantic}"\n\n'
        f'[servers.catalog]\ncommand = "{sys.executable}"\n'
        f'args = ["{HERE / "fixture_server.py"}", "--copies", "{copies}", {fixtures}]\n'
        "startup_timeout = 120\n"
    )
    assern = Path(sys.executable).parent / "assern"
    env = {
        **os.environ,
        "ASSERN_HOME": str(work / "home"),
        "ASSERN_NO_INSTANCE_SHARING": "1",
    }
    return [str(assern), "serve", "--config", str(config)], env


async def through_assern(
    paths: Sequence[Path], asked: Sequence[Query], copies: int, semantic: str
) -> dict[str, Any]:
    """search_tools and a trivial tools/call through `assern serve`, by the official client."""
    command, env = assern_setup(paths, copies, semantic)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    search_ms, call_ms = [], []
    async with Client(params, mode="legacy") as client:
        # A call waits for its backend to start (a search does not): then all is listed.
        ready = await client.call_tool("catalog_get_current_time", {"timezone": "UTC"})
        assert not ready.is_error, ready
        first = await client.call_tool("search_tools", {"query": "warm up"})
        total = (first.structured_content or {}).get("total", 0)
        assert total >= copies, first
        if semantic != "off":  # the model loads and embeds in the background: wait for it

            async def probe() -> Any:
                answer = await client.call_tool("search_tools", {"query": "weather tomorrow"})
                return answer.structured_content

            await embedded(probe)
        for _ in range(3):
            for query in asked:
                started = time.perf_counter()
                await client.call_tool("search_tools", {"query": query.text})
                search_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await client.call_tool("catalog_get_current_time", {"timezone": "UTC"})
                call_ms.append((time.perf_counter() - started) * 1000)
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        tree = [p for p in pids if f"{command[0]} serve" in _cmdline(p)]
        memory = max((rss_mb(p) for p in tree), default=0.0)
    return {
        "semantic": semantic,
        "tools": total,
        "search_ms_median": round(statistics.median(search_ms), 3),
        "search_ms_p99": round(percentile(search_ms, 0.99), 3),
        "tool_call_ms_median": round(statistics.median(call_ms), 3),
        "search_minus_call_ms_median": round(statistics.median(search_ms) - statistics.median(call_ms), 3),
        "assern_rss_mb": memory,
    }


async def embedded(search: Callable[[], Any], limit: float = 120.0) -> None:
    """Wait until the background embedding of the catalog is done: a search's structured
    answer then stops changing (a tool without its vector yet is ranked by its words)."""
    previous = None
    with trio.fail_after(limit):
        while True:
            found = await search()
            if found == previous:
                return
            previous = found
            await trio.sleep(2)


class RawLines:
    """A client of assern's stdio written by hand: JSON lines out and back, no models.
    What assern itself takes, without a client library's work."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._in, self._out = process.stdin, process.stdout
        self._buffer = b""
        self._next = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        message = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        await self._in.send_all(json.dumps(message).encode() + b"\n")
        while True:
            while b"\n" not in self._buffer:
                chunk = await self._out.receive_some()
                if not chunk:
                    raise RuntimeError("assern closed its stdout")
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
            answer = json.loads(line)
            if answer.get("id") == self._next:
                return dict(answer)

    async def notify(self, method: str) -> None:
        await self._in.send_all(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")


async def raw_through_assern(
    paths: Sequence[Path], asked: Sequence[Query], copies: int, semantic: str
) -> dict[str, Any]:
    """search_tools, a trivial tools/call and ping through `assern serve`, as JSON lines."""
    command, env = assern_setup(paths, copies, semantic)
    process = await trio.lowlevel.open_process(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    raw = RawLines(process)
    client = {"name": "bench-raw", "version": "1"}
    await raw.request(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    )
    await raw.notify("notifications/initialized")
    call = {"name": "catalog_get_current_time", "arguments": {"timezone": "UTC"}}
    ready = await raw.request("tools/call", call)
    assert not ready.get("result", {"isError": True}).get("isError"), ready
    if semantic != "off":

        async def probe() -> Any:
            answer = await raw.request("tools/call", {"name": "search_tools", "arguments": {"query": "rain"}})
            return answer["result"].get("structuredContent")

        await embedded(probe)
    timings: dict[str, list[float]] = {"search": [], "call": [], "ping": []}
    for _ in range(3):
        for query in asked:
            for kind, method, params in (
                ("search", "tools/call", {"name": "search_tools", "arguments": {"query": query.text}}),
                ("call", "tools/call", call),
                ("ping", "ping", {}),
            ):
                started = time.perf_counter()
                await raw.request(method, params)
                timings[kind].append((time.perf_counter() - started) * 1000)
    assert process.stdin is not None
    await process.stdin.aclose()
    with trio.move_on_after(10):
        await process.wait()
    if process.returncode is None:
        process.kill()
    return {
        "semantic": semantic,
        "search_ms_median": round(statistics.median(timings["search"]), 3),
        "search_ms_p99": round(percentile(timings["search"], 0.99), 3),
        "tool_call_ms_median": round(statistics.median(timings["call"]), 3),
        "ping_ms_median": round(statistics.median(timings["ping"]), 3),
    }


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------- main


def main() -> int:
    # The client warns that search exposure does not list the tool it calls directly.
    logging.getLogger("client").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="recall and a 1,000-tool scale run only")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--candidates",
        type=int,
        action="append",
        metavar="N",
        help="also rank blended, the meaning re-weighing the best N by words (repeatable; needs the extra)",
    )
    args = parser.parse_args()
    paths = sorted((HERE / "fixtures").glob("*.json"))
    found = listings(paths)
    catalog = search_catalog(found)
    asked = queries(catalog)
    semantic = semantic_for(catalog)
    report: dict[str, Any] = {
        "catalog": {"servers": len(found), "tools": len(catalog.tools), "queries": len(asked)},
        "recall": {},
    }
    kinds = subsets(asked)
    chosen = rankers(found, catalog, semantic)
    if args.candidates:
        if semantic is None:
            parser.error("--candidates needs the semantic extra (pip install 'assern[semantic]')")
        assert catalog.search is not None
        for count in args.candidates:
            chosen[f"blended@{count}"] = blended_at(catalog.search, semantic, count)
    answered: dict[str, Ranker] = {}
    for name, ranker in chosen.items():
        answers = {query.text: ranker(query.text) for query in asked}  # once per query
        answered[name] = answers.__getitem__
        report["recall"][name] = {kind: recall(answered[name], subset) for kind, subset in kinds.items()}
    report["spread"] = spreads(answered, asked)
    report["size"] = sizes(found, catalog, asked)
    target = 1_000 if args.smoke else SCALE_TOOLS
    report["scale"] = scale(paths, asked, target, with_semantic=not args.smoke)
    if not args.smoke:
        copies = max(1, round(SCALE_TOOLS / len(catalog.tools)))
        report["through_assern"] = [
            trio.run(through_assern, paths, asked, copies, "off"),
            trio.run(through_assern, paths, asked, copies, "auto"),
        ]
        report["raw_through_assern"] = [
            trio.run(raw_through_assern, paths, asked, copies, "off"),
            trio.run(raw_through_assern, paths, asked, copies, "auto"),
        ]
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def print_report(report: dict[str, Any]) -> None:
    catalog = report["catalog"]
    print(
        f"catalog: {catalog['tools']} tools of {catalog['servers']} servers, {catalog['queries']} queries\n"
    )
    print(
        f"{'ranking':<10} {'queries':<20} {'n':>4} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'all@5':>6}"
    )
    for name, kinds in report["recall"].items():
        for kind, figures in kinds.items():
            keys = ("recall@1", "recall@5", "recall@10", "mrr", "all@5")
            cells = " ".join(f"{figures[key]:>6.3f}" for key in keys)
            print(f"{name:<10} {kind:<20} {figures['queries']:>4} {cells}")
    print("\nRecall@5 on the parts the targets are read on, its 95% interval (bootstrap over the")
    print("queries), and query by query against plain BM25 (found more, found less, sign test p):")
    for title, by_ranking in report.get("spread", {}).items():
        for name, entry in by_ranking.items():
            line = f"{title:<30} {name:<10} n={entry['queries']:<4} {entry['recall@5']:.3f} "
            line += f"[{entry['low']:.3f}, {entry['high']:.3f}]"
            if "against plain" in entry:
                versus = entry["against plain"]
                line += f"  +{versus['gained']} -{versus['lost']} p={versus['p']}"
            print(line)
    print()
    for section in ("size", "scale"):
        print(f"{section}: " + ", ".join(f"{key}={value}" for key, value in report[section].items()))
    for run in report.get("through_assern", []):
        print("through assern, official client: " + ", ".join(f"{key}={value}" for key, value in run.items()))
    for run in report.get("raw_through_assern", []):
        print("through assern, JSON lines: " + ", ".join(f"{key}={value}" for key, value in run.items()))


if __name__ == "__main__":
    sys.exit(main())
