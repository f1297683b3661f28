"""search_tools through a real assern at 10,000 tools: median and p99.

    .venv/bin/python ops/bench/search/latency.py                  # 20 backends x 500 tools
    .venv/bin/python ops/bench/search/latency.py --tools 2000 --rounds 1   # a quick look

`assern serve` runs in search exposure over `--backends` copies of ops/bench/bench_server.py
whose tools add up to `--tools` (its `echo`, `sleep` and numbered tools); a client that
writes and reads JSON lines by hand (run.py's RawLines: no client library's work in the
figures) asks `search_tools` again and again and times each answer. Queries:

- `labelled`: the texts of the labelled queries (ops/bench/search/), which name other
  servers' tasks: most of their words are unknown to this catalog;
- `common`: "numbered tool N returns its name", whose words are in every tool: the
  worst case of the ranking (every posting walked);
- `echo`: "echo the text back", answered by each backend's `echo`.

Each is measured with learning from use off, and on with a use file that has counts for
a few hundred tools (the answer is then re-ranked from the best 20), and beside them a
trivial tools/call (`echo`) and a `ping` through the same assern. The machine's load
shows in every figure: compare figures of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from assern.actors.search import learned as lrn

HERE = Path(__file__).resolve().parent
BENCH_SERVER = HERE.parent / "bench_server.py"
sys.path.insert(0, str(HERE))

import run  # noqa: E402 - the benchmark's folder is no package


def setup(backends: int, tools: int, learn: str) -> tuple[list[str], dict[str, str]]:
    work = Path(tempfile.mkdtemp(prefix="assern-search-latency-"))
    home = work / "home"
    per = tools // backends
    tables = []
    for i in range(backends):
        count = per + (1 if i < tools % backends else 0)
        tables.append(
            f'[servers.b{i:02d}]\ncommand = "{sys.executable}"\n'
            f'args = ["{BENCH_SERVER}", "--tools", "{count}", "--name", "b{i:02d}"]\n'
        )
    config = work / "config.toml"
    config.write_text(
        f'[settings]\nexposure = "search"\n\n[settings.search]\nsemantic = "off"\nlearn = "{learn}"\n\n'
        + "\n".join(tables)
    )
    if learn == "on":  # counts for a few hundred tools, as a user's months of use
        counts = {(f"b{i % backends:02d}", f"tool_{i % (per - 2) + 1:02d}"): 1 + i % 9 for i in range(300)}
        counts.update({(f"b{i:02d}", "echo"): 5 for i in range(backends)})
        lrn.save(lrn.use_file(home), counts)
    env = {**os.environ, "ASSERN_HOME": str(home), "ASSERN_NO_INSTANCE_SHARING": "1"}
    return [str(Path(sys.executable).parent / "assern"), "serve", "--config", str(config)], env


async def measure(backends: int, tools: int, learn: str, rounds: int, texts: list[str]) -> dict[str, Any]:
    command, env = setup(backends, tools, learn)
    process = await trio.lowlevel.open_process(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    raw = run.RawLines(process)
    client = {"name": "bench-latency", "version": "1"}
    await raw.request(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    )
    await raw.notify("notifications/initialized")
    # Every backend answers a call once it is up: then every tool is in the index.
    for i in range(backends):
        answer = await raw.request("tools/call", {"name": f"b{i:02d}_echo", "arguments": {"text": "up"}})
        assert not answer.get("result", {"isError": True}).get("isError"), answer
    first = await raw.request("tools/call", {"name": "search_tools", "arguments": {"query": "echo"}})
    total = first["result"]["structuredContent"]["total"]
    queries = {
        "labelled": texts,
        "common": [f"numbered tool {i} returns its name" for i in range(1, 41)],
        "echo": ["echo the text back"] * 40,
    }
    timings: dict[str, list[float]] = {kind: [] for kind in (*queries, "call", "ping")}
    call = {"name": "b00_echo", "arguments": {"text": "x"}}
    for _ in range(rounds):
        for kind, asked in queries.items():
            for text in asked:
                params = {"name": "search_tools", "arguments": {"query": text}}
                started = time.perf_counter()
                await raw.request("tools/call", params)
                timings[kind].append((time.perf_counter() - started) * 1000)
            for method, params in (("call", call), ("ping", {})):
                for _ in range(20):
                    started = time.perf_counter()
                    await raw.request("tools/call" if method == "call" else "ping", params)
                    timings[method].append((time.perf_counter() - started) * 1000)
    assert process.stdin is not None
    await process.stdin.aclose()
    with trio.move_on_after(20):
        await process.wait()
    if process.returncode is None:
        process.kill()
    searches = [t for kind in queries for t in timings[kind]]
    figures: dict[str, Any] = {"learn": learn, "tools": total}
    figures["search_ms_median"] = round(statistics.median(searches), 3)
    figures["search_ms_p99"] = round(run.percentile(searches, 0.99), 3)
    for kind, values in timings.items():
        figures[f"{kind}_ms_median"] = round(statistics.median(values), 3)
        figures[f"{kind}_ms_p99"] = round(run.percentile(values, 0.99), 3)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000, help="tools in all (default 10,000)")
    parser.add_argument("--backends", type=int, default=20, help="bench servers (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="times every query is asked (default 3)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    import labels

    texts = [query.text for query in labels.read(_AnyName())][:200]
    report = [
        trio.run(measure, args.backends, args.tools, learn, args.rounds, texts) for learn in ("off", "on")
    ]
    for figures in report:
        print(", ".join(f"{key}={value}" for key, value in figures.items()))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


class _AnyName(dict[tuple[str, str], str]):
    """Every label is a name: only the queries' texts are wanted here."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: tuple[str, str]) -> str:
        return "/".join(key)


if __name__ == "__main__":
    sys.exit(main())
