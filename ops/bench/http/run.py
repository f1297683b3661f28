"""HTTP per-call overhead and throughput: assern's HTTP front next to a direct HTTP
connection to the backend and next to FastMCP's proxy served over HTTP, in one run.

    .venv/bin/python ops/bench/http/run.py                 # ~2 minutes on 2 cores
    .venv/bin/python ops/bench/http/run.py --smoke         # a few calls per path
    .venv/bin/python ops/bench/http/run.py --json out.json
    .venv/bin/python ops/bench/http/run.py --only 2026 --only fastmcp   # some paths
    .venv/bin/python ops/bench/http/run.py --interleaved 2000   # direct, floor, assern one by one
    .venv/bin/python ops/bench/http/run.py --cpu-calls 1500 --only "assern (2026"  # CPU in ticks

Every path is driven by the official `mcp` client over streamable HTTP, calling the
bench server's `echo`:

- direct: the bench server itself over HTTP (the SDK's streamable-HTTP app under
  hypercorn's trio worker);
- assern: `assern serve --http 0 --no-stdio` with the bench server as its stdio
  backend, in both protocol eras;
- assern → http: assern with the direct server as a streamable-HTTP backend, its
  clients in both protocol eras (assern speaks the handshake era to the backend);
- assern → pinned http: the same backend pinned to `protocol = "2026-07-28"` (requests
  assern writes itself), a handshake-era client;
- floor: `floor.py`, the least a front under hypercorn's trio worker adds: each body
  passed as it came to the same stdio backend (or, `floor → http`, re-posted to the
  direct server), with no names, checks, logs or sessions of its own. What assern adds
  above it is assern's own; what it adds over direct, no such front avoids;
- fastmcp: FastMCP's proxy of the same stdio backend, run over HTTP (in its own
  virtualenv, set up on the first run as ops/bench/run.py does);
- fastmcp → http: FastMCP's proxy with the direct server as its HTTP backend (the
  peer of assern → http).

Per-call figures come from alternating blocks (direct, then the path), so drift hits
both; throughput is 8 concurrent callers for a fixed window, alternating too. The
aggregator's CPU per sequential call (its process's user and system time over the
blocks through it, from /proc) is the figure that drifts least with the machine's
speed: compare changes of the front with it.

Two other modes print what the blocks cannot:

- `--interleaved N`: N rounds of one 2026-07-28 call each to direct, the floor and
  assern (both on the stdio backend), in turn, so the machine's drift hits all three
  alike; the medians over direct, and each front's CPU per call.
- `--cpu-calls N`: for each path (see `--only`), N calls back to back directly and N
  through it: the wall time per call, and the CPU per call of the direct server, of the
  front (also in clock ticks over the N calls, /proc's own unit) and of its backend.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from mcp import Client

HERE = Path(__file__).resolve().parent
FLOOR = HERE / "floor.py"
BENCH = HERE.parent
sys.path.insert(0, str(BENCH))

from measure import Caller, CallFailed, gc_held, per_call, summary_ms, throughput  # noqa: E402
from peers import BENCH_SERVER, FASTMCP, FASTMCP_HUB, base_env, setup_peer  # noqa: E402
from procs import cpu_seconds, find_backend  # noqa: E402


async def until_listening(port: int, limit: float = 60.0) -> None:
    """Wait until something accepts connections on the loopback `port`."""
    with trio.fail_after(limit):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.1)
                continue
            await stream.aclose()
            return


@asynccontextmanager
async def process(
    argv: list[str], env: dict[str, str], ready: bytes
) -> AsyncIterator[tuple[trio.Process, str]]:
    """Start `argv`; yield it and group 1 of `ready` once its stderr matches it (a port
    number instead: once that port accepts connections, and its /mcp URL)."""
    proc = await trio.lowlevel.open_process(argv, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    buffer = b""
    try:
        if ready.isdigit():  # a port: ready once it accepts connections
            await until_listening(int(ready))
            buffer = b"http://127.0.0.1:" + ready + b"/mcp"
            ready = rb"(http://\S+)"
        with trio.fail_after(60):
            while (found := re.search(ready, buffer)) is None:
                chunk = await proc.stderr.receive_some()
                if not chunk:
                    raise RuntimeError(f"{argv[0]} exited: {buffer.decode(errors='replace')[-500:]}")
                buffer += chunk
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stderr)
            yield proc, found.group(1).decode()
            nursery.cancel_scope.cancel()
    finally:
        proc.terminate()
        with trio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some():
        pass


def caller(client: Client, prefix: str) -> Caller:
    async def call(_backend: int, tool: str, arguments: dict[str, Any]) -> None:
        result = await client.call_tool(prefix + tool, arguments)
        if result.is_error:
            raise CallFailed(str(result.content)[:200])

    return call


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    env = base_env()
    blocks, block, warmup, budget = (2, 20, 10, 5.0) if args.smoke else (10, 200, 100, 40.0)
    window, rounds = (0.5, 1) if args.smoke else (3.0, 2)
    backend_args = [sys.executable, str(BENCH_SERVER), "--tools", "10", "--name", "b01"]
    results: dict[str, Any] = {}
    async with process([*backend_args, "--http", "0"], env, rb"ready (\d+)") as (direct_proc, port):
        direct_pid = direct_proc.pid
        direct_url = f"http://127.0.0.1:{port}/mcp"
        stdio_config = work / "stdio.toml"
        stdio_config.write_text(
            "[servers.b01]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps([str(BENCH_SERVER), '--tools', '10', '--name', 'b01'])}\n"
        )
        http_config = work / "http.toml"
        http_config.write_text(f'[servers.b01]\nurl = "{direct_url}"\n')
        assern = str(Path(sys.executable).with_name("assern"))
        assern_env = env | {"ASSERN_HOME": str(work / "assern-home"), "ASSERN_NO_INSTANCE_SHARING": "1"}
        paths: list[tuple[str, list[str], dict[str, str], bytes, str]] = []
        eras = ("legacy", "2026-07-28")
        at = rb"at (http://\S+)"  # what assern and the floor print once they listen
        serve = [assern, "serve", "--http", "0", "--no-stdio", "--config"]
        paths += [(f"assern ({era})", [*serve, str(stdio_config)], assern_env, at, era) for era in eras]
        to_http = [*serve, str(http_config)]
        paths += [(f"assern -> http backend ({era})", to_http, assern_env, at, era) for era in eras]
        pinned_config = work / "pinned.toml"
        pinned_config.write_text(f'[servers.b01]\nurl = "{direct_url}"\nprotocol = "2026-07-28"\n')
        pinned = [*serve, str(pinned_config)]
        paths.append(("assern -> pinned http backend (legacy)", pinned, assern_env, at, "legacy"))
        floor = [sys.executable, str(FLOOR), "--port", "0"]
        paths += [(f"floor ({era})", [*floor, "--", *backend_args], env, at, era) for era in eras]
        floor_to_http = [*floor, "--url", direct_url]
        paths += [(f"floor -> http backend ({era})", floor_to_http, env, at, era) for era in eras]
        if not args.no_peers and not args.interleaved:
            usable, note = (
                setup_peer(FASTMCP.peer, work / "fastmcp-setup.log") if FASTMCP.peer else (False, "")
            )
            print(f"fastmcp: {note}", file=sys.stderr)
            if usable and FASTMCP.peer is not None:
                backends = {
                    "fastmcp proxy (legacy)": {"command": sys.executable, "args": backend_args[1:]},
                    "fastmcp -> http backend (legacy)": {"url": direct_url},
                }
                for index, (name, entry) in enumerate(backends.items()):
                    servers = work / f"backends-{index}.json"
                    servers.write_text(json.dumps({"mcpServers": {"b01": entry}}))
                    hub_port = free_port()
                    argv = [
                        str(FASTMCP.peer.venv / "bin" / "python"),
                        str(FASTMCP_HUB),
                        str(servers),
                        "--http",
                        str(hub_port),
                    ]
                    paths.append((name, argv, env, str(hub_port).encode(), "legacy"))
        if args.interleaved:
            chosen = {name: (argv, penv, ready) for name, argv, penv, ready, _ in paths}
            fronts = [(name, *chosen[name]) for name in INTERLEAVED]
            return await interleaved(direct_pid, direct_url, fronts, args.interleaved, smoke=args.smoke)
        if args.only:
            paths = [path for path in paths if any(part in path[0] for part in args.only)]
        for name, argv, penv, ready, era in paths:
            if args.cpu_calls:
                async with process(argv, penv, ready) as (front, url):
                    over_http = "http backend" in name
                    results[name] = await back_to_back(
                        name, direct_pid, direct_url, front.pid, url, era, args.cpu_calls, over_http
                    )
                continue
            async with process(argv, penv, ready) as (front, found):
                url = found
                async with Client(direct_url, mode=era) as direct, Client(url, mode=era) as through:
                    d, t = caller(direct, ""), caller(through, "" if name.startswith("floor") else "b01_")
                    figures = await per_call(
                        d, t, blocks, block, warmup, budget, cpu=partial(cpu_seconds, front.pid)
                    )
                    figures["throughput"] = await throughput(d, t, 1, 8, window, rounds)
                results[name] = figures
                print(
                    f"{name:34} direct {figures['direct']['median_ms']:.3f} ms, through "
                    f"{figures['through']['median_ms']:.3f} ms (p99 {figures['through']['p99_ms']:.3f}); "
                    f"overhead {figures['overhead_median_us'] / 1000:.3f} ms median; "
                    f"{figures['throughput']['through']['calls_per_s']:.0f} calls/s "
                    f"(direct {figures['throughput']['direct']['calls_per_s']:.0f}); "
                    f"its CPU per call {figures['aggregator_cpu_per_call_us'] / 1000:.2f} ms",
                    flush=True,
                )
    return results


#: the paths `--interleaved` calls in turn with direct: the floor, then assern
INTERLEAVED = ("floor (2026-07-28)", "assern (2026-07-28)")


def cpu_ticks(pid: int) -> int:
    """The process's user plus system time so far in clock ticks (/proc's own unit)."""
    return round(cpu_seconds(pid) * os.sysconf("SC_CLK_TCK"))


async def interleaved(
    direct_pid: int,
    direct_url: str,
    fronts: list[tuple[str, list[str], dict[str, str], bytes]],
    rounds: int,
    *,
    smoke: bool,
) -> dict[str, Any]:
    """`rounds` rounds of one 2026-07-28 echo call to direct, then through each front in
    turn; each front's median over direct's, and the CPU per call of each process."""
    era = "2026-07-28"
    async with contextlib.AsyncExitStack() as stack:
        started = [
            await stack.enter_async_context(process(argv, penv, ready)) for _, argv, penv, ready in fronts
        ]
        direct = await stack.enter_async_context(Client(direct_url, mode=era))
        callers = [("direct", caller(direct, ""), direct_pid)]
        for (name, *_), (front, url) in zip(fronts, started, strict=True):
            client = await stack.enter_async_context(Client(url, mode=era))
            callers.append((name, caller(client, "" if name.startswith("floor") else "b01_"), front.pid))
        for _ in range(5 if smoke else 100):  # warm-up
            for _, call, _ in callers:
                await call(0, "echo", {"text": "warm"})
        samples: dict[str, list[float]] = {name: [] for name, _, _ in callers}
        cpu = {name: 0.0 for name, _, _ in callers}
        with gc_held():
            for index in range(rounds):
                for name, call, pid in callers:
                    before, began = cpu_seconds(pid), time.perf_counter()
                    await call(0, "echo", {"text": f"round {index}"})
                    samples[name].append(time.perf_counter() - began)
                    cpu[name] += cpu_seconds(pid) - before
    direct_ms = summary_ms(samples["direct"])["median_ms"]
    figures: dict[str, Any] = {"rounds": rounds}
    print(f"interleaved, {era}, {rounds} rounds of direct, " + ", ".join(n for n, *_ in fronts))
    for name, _, _ in callers:
        median = summary_ms(samples[name])["median_ms"]
        figures[name] = {
            "median_ms": median,
            "over_direct_ms": median - direct_ms,
            "cpu_per_call_ms": cpu[name] / rounds * 1000,
        }
        print(
            f"  {name:22} median {median:.3f} ms"
            + ("" if name == "direct" else f", over direct {median - direct_ms:+.2f} ms")
            + f"; its CPU {cpu[name] / rounds * 1000:.2f} ms a call"
        )
    floor, assern = (figures[name] for name in INTERLEAVED)
    figures["assern_over_floor"] = {
        "median_ms": assern["median_ms"] - floor["median_ms"],
        "cpu_per_call_ms": assern["cpu_per_call_ms"] - floor["cpu_per_call_ms"],
    }
    print(
        f"  assern over the floor: {figures['assern_over_floor']['median_ms']:+.2f} ms median, "
        f"{figures['assern_over_floor']['cpu_per_call_ms']:+.2f} ms of CPU a call"
    )
    return {"interleaved": figures}


async def back_to_back(
    name: str,
    direct_pid: int,
    direct_url: str,
    front_pid: int,
    url: str,
    era: str,
    calls: int,
    over_http: bool,
) -> dict[str, Any]:
    """`calls` echo calls back to back directly, then `calls` through the front: wall time
    and CPU per call of each process on the way."""
    prefix = "" if name.startswith("floor") else "b01_"
    async with Client(direct_url, mode=era) as direct, Client(url, mode=era) as through:
        d, t = caller(direct, ""), caller(through, prefix)
        for _ in range(min(100, calls)):
            await d(0, "echo", {"text": "warm"})
            await t(0, "echo", {"text": "warm"})
        backend_pid = direct_pid if over_http else find_backend(front_pid, "b01")  # started by now
        spent: dict[str, float] = {}
        with gc_held():
            before, began = cpu_seconds(direct_pid), time.perf_counter()
            for index in range(calls):
                await d(0, "echo", {"text": f"call {index}"})
            spent["direct_wall"] = time.perf_counter() - began
            spent["direct_cpu"] = cpu_seconds(direct_pid) - before
            pids = {"front": front_pid, "backend": backend_pid}
            ticks = {key: cpu_ticks(pid) for key, pid in pids.items() if pid is not None}
            began = time.perf_counter()
            for index in range(calls):
                await t(0, "echo", {"text": f"call {index}"})
            spent["through_wall"] = time.perf_counter() - began
            used = {key: cpu_ticks(pid) - ticks[key] for key, pid in pids.items() if pid is not None}
    tick = 1000 / os.sysconf("SC_CLK_TCK")
    figures = {
        "calls": calls,
        "direct_ms": spent["direct_wall"] / calls * 1000,
        "direct_server_cpu_ms": spent["direct_cpu"] / calls * 1000,
        "through_ms": spent["through_wall"] / calls * 1000,
        "front_cpu_ticks": used["front"],
        "front_cpu_ms": used["front"] * tick / calls,
        "backend_cpu_ms": used["backend"] * tick / calls if "backend" in used else None,
    }
    backend = "" if figures["backend_cpu_ms"] is None else f", its backend {figures['backend_cpu_ms']:.2f} ms"
    print(
        f"{name:34} {calls} calls back to back: {figures['through_ms']:.2f} ms each "
        f"(direct {figures['direct_ms']:.2f} ms); CPU a call: the front {figures['front_cpu_ms']:.2f} ms "
        f"({used['front']} ticks in all){backend}, the direct server "
        f"{figures['direct_server_cpu_ms']:.2f} ms",
        flush=True,
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few calls per path")
    parser.add_argument("--no-peers", action="store_true", help="assern and direct only")
    parser.add_argument(
        "--only", action="append", metavar="TEXT", help="only the paths whose name holds TEXT (repeatable)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--interleaved",
        type=int,
        metavar="N",
        help="N rounds of one 2026-07-28 call each to direct, the floor and assern, in turn",
    )
    parser.add_argument(
        "--cpu-calls",
        type=int,
        metavar="N",
        help="N calls back to back per path, directly and through it: wall time and CPU per call",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assern-http-bench-") as folder:
        results = trio.run(measure, args, Path(folder))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
