"""Per-call latency of tools/call through assern against the same call made directly.

Both paths talk to the same kind of backend (ops/bench/bench_server.py) with the official
`mcp` client, in alternating blocks within one run, so both see the same machine noise.
Prints median and p99 of each path, their ratio and the difference, and writes JSON.

    python ops/bench/call_latency.py                 # 10 blocks x 200 calls per path
    python ops/bench/call_latency.py --smoke         # a few calls, for the test suite
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p99_ms": percentile(samples, 0.99) * 1000,
        "mean_ms": statistics.fmean(samples) * 1000,
        "calls": len(samples),
    }


def backend_params() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(HERE / "bench_server.py"), "--tools", "10"]
    )


def assern_params(workdir: Path) -> StdioServerParameters:
    config = workdir / "config.toml"
    config.write_text(
        "[servers.bench]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(HERE / "bench_server.py"))}, "--tools", "10"]\n'
    )
    assern = shutil.which("assern", path=str(Path(sys.executable).parent)) or "assern"
    env = {"ASSERN_HOME": str(workdir / "home"), "ASSERN_NO_INSTANCE_SHARING": "1"}
    import os

    env["PATH"] = os.environ.get("PATH", "")
    env["HOME"] = os.environ.get("HOME", str(workdir))
    return StdioServerParameters(command=assern, args=["serve", "--config", str(config)], env=env)


async def timed_block(client: Client, name: str, calls: int, into: list[float]) -> None:
    for i in range(calls):
        started = time.perf_counter()
        result = await client.call_tool(name, {"text": f"ping {i}"})
        into.append(time.perf_counter() - started)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result}")


async def run(blocks: int, calls: int, warmup: int) -> dict[str, Any]:
    direct: list[float] = []
    through: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Client(backend_params(), mode="legacy") as direct_client,
            Client(assern_params(Path(tmp)), mode="legacy") as assern_client,
        ):
            await assern_client.list_tools()
            await timed_block(direct_client, "echo", warmup, [])
            await timed_block(assern_client, "bench_echo", warmup, [])
            for _ in range(blocks):
                await timed_block(direct_client, "echo", calls, direct)
                await timed_block(assern_client, "bench_echo", calls, through)
    d, a = summary(direct), summary(through)
    return {
        "benchmark": "tools/call latency, sequential",
        "direct": d,
        "assern": a,
        "ratio_median": a["median_ms"] / d["median_ms"],
        "overhead_median_us": (a["median_ms"] - d["median_ms"]) * 1000,
        "overhead_p99_us": (a["p99_ms"] - d["p99_ms"]) * 1000,
    }


def print_report(report: dict[str, Any]) -> None:
    print(f"{'path':<10}{'median ms':>12}{'p99 ms':>12}{'calls':>8}")
    for path in ("direct", "assern"):
        row = report[path]
        print(f"{path:<10}{row['median_ms']:>12.3f}{row['p99_ms']:>12.3f}{row['calls']:>8}")
    print(
        f"ratio (median) {report['ratio_median']:.2f}x; "
        f"overhead median {report['overhead_median_us']:.0f} us, "
        f"p99 {report['overhead_p99_us']:.0f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="a few calls only (used by the test suite)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    blocks, calls, warmup = (2, 5, 2) if args.smoke else (args.blocks, args.calls, 50)
    report = trio.run(run, blocks, calls, warmup)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
