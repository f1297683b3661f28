"""assern's resident memory by the number of tools it serves, and what it starts from.

    .venv/bin/python ops/bench/memory.py                     # 2, 100 and 1,000 tools
    .venv/bin/python ops/bench/memory.py --size 1x2 --size 20x50 --json memory.json

For each size (K backends of ops/bench/bench_server.py with T tools each), `assern serve`
over stdio (private ASSERN_HOME, no instance sharing) is asked by the official client in
the handshake era until it lists every tool, then for one call; its RSS and peak RSS
(VmRSS, VmHWM) are read from /proc. The largest size is then asked by a 2026-07-28
client too, which loads the `mcp` SDK (and its HTTP server stack) into assern. The
floor is a bare interpreter that imports what every assern holds: trio with `ssl`, and
the protocol models of `mcp_types`.

What a user's machine holds for one instance is every process assern starts but the
backends: assern itself and its watchdog. Each size also reads the PSS of each of them
(/proc/PID/smaps_rollup: each shared page divided among the processes that map it, so
the interpreter's pages shared with the backends are counted once among them all) and
prints their sum, `instance_pss_mb`, with each one's RSS and PSS beside it and the
backends' PSS apart. The load average before and after the run says what else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from procs import cmdline, descendants, descendants_with_parents, loadavg, peak_rss_kb, pss_kb, rss_kb  # noqa: E402

BENCH_SERVER = HERE / "bench_server.py"
SIZES = ("1x2", "10x10", "20x50")
#: what the floor imports: every assern holds these
FLOOR = (
    "import ssl, trio, mcp_types, pathlib\n"
    "status = pathlib.Path('/proc/self/status').read_text().splitlines()\n"
    "print([line for line in status if line.startswith('VmRSS:')][0])"
)


def floor_mb() -> float:
    out = subprocess.run([sys.executable, "-c", FLOOR], capture_output=True, text=True, check=True).stdout
    return int(out.split()[1]) / 1024


def assern_of(me: int) -> int:
    """The `assern serve` this process's client started."""
    for pid in descendants(me):
        argv = cmdline(pid)
        if len(argv) > 2 and argv[1].endswith("assern") and argv[2] == "serve":
            return pid
    raise RuntimeError("no assern serve among this process's children")


def role(argv: list[str]) -> str:
    """What a process of the instance is, by its command line."""
    if any(arg.endswith("reaper.py") for arg in argv):
        return "watchdog"
    if any(arg.endswith(BENCH_SERVER.name) for arg in argv):
        return "backend"
    return " ".join(argv)[-60:]


def instance(pid: int) -> dict[str, Any]:
    """The processes of the instance rooted at `pid`: assern and every process it started
    but the backends (and what those started), each with its RSS and PSS; their PSS summed;
    the backends' PSS apart."""
    backends: set[int] = set()
    own = [("assern", pid)]
    for child, parent in descendants_with_parents(pid):
        if parent in backends or role(cmdline(child)) == "backend":
            backends.add(child)
        else:
            own.append((role(cmdline(child)), child))
    return {
        "instance_pss_mb": round(sum(pss_kb(member) for _, member in own) / 1024, 1),
        "processes": [
            {
                "role": name,
                "pid": member,
                "rss_mb": round(rss_kb(member) / 1024, 1),
                "pss_mb": round(pss_kb(member) / 1024, 1),
            }
            for name, member in own
        ],
        "backend_processes": len(backends),
        "backends_pss_mb": round(sum(pss_kb(member) for member in backends) / 1024, 1),
    }


async def one_size(backends: int, tools: int, work: Path, mode: str) -> dict[str, Any]:
    """assern with `backends` x `tools` and one client in `mode`: its memory once the
    client has listed every tool and made a call."""
    config = work / f"{backends}x{tools}.toml"
    config.write_text(
        "".join(
            f"[servers.b{i:02d}]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps([str(BENCH_SERVER), '--tools', str(tools), '--name', f'b{i:02d}'])}\n"
            for i in range(1, backends + 1)
        )
    )
    env = {
        **os.environ,
        "ASSERN_HOME": str(work / f"home-{backends}x{tools}-{mode}"),
        "ASSERN_NO_INSTANCE_SHARING": "1",
    }
    assern = str(Path(sys.executable).with_name("assern"))
    params = StdioServerParameters(command=assern, args=["serve", "--config", str(config)], env=env)
    async with Client(params, mode=mode) as client:
        with trio.fail_after(120):
            while len((await client.list_tools()).tools) < backends * tools:  # noqa: ASYNC110
                await trio.sleep(0.2)  # the backends start in their own time: ask again
            result = await client.call_tool("b01_echo", {"text": "x"})
            assert not result.is_error, result
        # Only now: a client told its era adopts it without a round trip, so its
        # `__aenter__` may return before the process is even spawned.
        pid = assern_of(os.getpid())
        return {
            "backends": backends,
            "tools": backends * tools,
            "client": mode,
            "rss_mb": round(rss_kb(pid) / 1024, 1),
            "peak_rss_mb": round(peak_rss_kb(pid) / 1024, 1),
            **instance(pid),
        }


async def measure(sizes: list[tuple[int, int]], work: Path) -> dict[str, Any]:
    before = loadavg()
    rows = [await one_size(backends, tools, work, "legacy") for backends, tools in sizes]
    backends, tools = max(sizes, key=lambda size: size[0] * size[1])
    rows.append(await one_size(backends, tools, work, "2026-07-28"))
    load = {"before": before, "after": loadavg()}
    return {"floor_mb": round(floor_mb(), 1), "assern": rows, "load_average": load}


def size(text: str) -> tuple[int, int]:
    backends, _, tools = text.partition("x")
    return int(backends), int(tools)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size",
        action="append",
        type=size,
        metavar="KxT",
        help=f"K backends of T tools (at least 2; repeatable; default {', '.join(SIZES)})",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sizes = args.size or [size(text) for text in SIZES]
    with tempfile.TemporaryDirectory(prefix="assern-memory-bench-") as folder:
        figures = trio.run(measure, sizes, Path(folder))
    load = figures["load_average"]
    print(f"load average (1, 5, 15 min) before: {load['before']}, after: {load['after']}")
    print(f"a bare interpreter with trio, ssl and mcp_types: {figures['floor_mb']:.1f} MB")
    for row in figures["assern"]:
        era = "handshake-era client" if row["client"] == "legacy" else f"{row['client']} client"
        each = ", ".join(
            f"{p['role']} {p['rss_mb']:.1f} MB RSS / {p['pss_mb']:.1f} PSS" for p in row["processes"]
        )
        print(
            f"assern, {row['tools']:>5} tools ({row['backends']} backends), a {era}: "
            f"RSS {row['rss_mb']:.1f} MB (peak {row['peak_rss_mb']:.1f} MB); "
            f"one instance, backends apart: PSS {row['instance_pss_mb']:.1f} MB ({each}); "
            f"its backends: PSS {row['backends_pss_mb']:.1f} MB"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
