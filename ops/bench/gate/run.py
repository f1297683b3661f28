"""What the tool surface costs and saves: tokens per exposure, validation per call, and
the per-call overhead through `assern serve` with validation off, warn and strict.

    python ops/bench/gate/run.py             # everything (about a minute)
    python ops/bench/gate/run.py --smoke     # a few calls on three paths, for the test suite
    python ops/bench/gate/run.py --json out.json

1. Tokens of tools/list (4 bytes a token, as assern estimates) for the same catalog (the
   real tools of ops/bench/search/fixtures) in each exposure: all, grouped (text and
   TOON action tables) and search.
2. Validation in process: building that catalog with its schemas checked (against
   their meta-schemas; each is compiled on its tool's first call), the first call of a
   tool (which compiles its schema), and the cost per call after it of checking a valid
   10-field argument object (the call path's own `screen_arguments`), median and p99
   over batches.
3. Middleware in process: the cost per call of a chain around a call that answers at
   once (no middleware; one, three pass-through ones; each shipped middleware; the three
   together; one asyncio pass-through through the asyncio host), median and p99.
4. End to end: one backend (ops/bench/bench_server.py) directly and through `assern
   serve` processes with `validate = "off"`, `"warn"` and `"strict"`, with middleware
   configured for other tools only ("elsewhere": the echo tool keeps the raw lane), and
   with the three shipped middlewares around the echo tool ("chain"), in alternating
   blocks within one run; median and p99 per call, and each one's overhead over direct.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import structlog
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
FIXTURES = BENCH / "search" / "fixtures"
ROOT = BENCH.parents[1]
sys.path.insert(0, str(ROOT / "src"))

from assern.actors.config.spec import CallRules, MiddlewareSpec  # noqa: E402
from assern.actors.gate.asyncio_host import AsyncioHost  # noqa: E402
from assern.actors.gate.chain import Chain, Layer, Middlewares  # noqa: E402
from assern.actors.gate.gate import build_gate, screen_arguments  # noqa: E402
from assern.actors.gate.middleware import Call, Next  # noqa: E402
from assern.actors.router.catalog import BackendListing, build_catalog  # noqa: E402
from assern.actors.router.views import estimate_tokens  # noqa: E402


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def listings() -> list[BackendListing]:
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        fixture = json.loads(path.read_text())
        tools = tuple(types.Tool.model_validate(tool) for tool in fixture["tools"])
        found.append(BackendListing(server=fixture["server"], tools=tools))
    return found


def tokens_per_exposure() -> dict[str, Any]:
    real = listings()
    figures: dict[str, Any] = {"servers": len(real), "tools": sum(len(x.tools) for x in real)}
    for label, exposure, fmt in (
        ("all", "all", "text"),
        ("grouped", "grouped", "text"),
        ("grouped_toon", "grouped", "toon"),
        ("search", "search", "text"),
    ):
        catalog = build_catalog(real, exposure=exposure, description_format=fmt)  # type: ignore[arg-type]
        figures[label] = {"tokens": estimate_tokens(catalog.tools_json), "listed": len(catalog.listing)}
    return figures


TEN_FIELDS = {
    "type": "object",
    "properties": {
        "owner": {"type": "string"},
        "repo": {"type": "string"},
        "title": {"type": "string", "maxLength": 256},
        "body": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "assignees": {"type": "array", "items": {"type": "string"}},
        "milestone": {"type": "integer", "minimum": 1},
        "draft": {"type": "boolean"},
        "state": {"enum": ["open", "closed"]},
        "due": {"type": "string"},
    },
    "required": ["owner", "repo", "title"],
}
TEN_ARGUMENTS = {
    "owner": "octo",
    "repo": "hello",
    "title": "A bug",
    "body": "It breaks.",
    "labels": ["bug", "p1"],
    "assignees": ["me"],
    "milestone": 3,
    "draft": False,
    "state": "open",
    "due": "2026-12-01",
}


def validation_cost(batches: int, per_batch: int) -> dict[str, Any]:
    real = listings()
    builds: dict[str, list[float]] = {"warn": [], "off": []}
    for _ in range(3 if batches < 10 else 9):
        for mode in builds:
            started = time.perf_counter()
            catalog = build_catalog(real, rules=CallRules(validate=mode))  # type: ignore[arg-type]
            builds[mode].append(time.perf_counter() - started)
    with_gates, without = statistics.median(builds["warn"]), statistics.median(builds["off"])
    tool = types.Tool(name="gh_create_issue", input_schema=TEN_FIELDS)
    first: list[float] = []
    for _ in range(batches):
        fresh = build_gate(tool, CallRules(validate="strict"), (tool.name,))
        assert fresh is not None
        started = time.perf_counter()
        screen_arguments(fresh, "gh_create_issue", tool, "gh", "create_issue", TEN_ARGUMENTS, None)
        first.append(time.perf_counter() - started)
    gate = build_gate(tool, CallRules(validate="strict"), (tool.name,))
    assert gate is not None
    per_call: list[float] = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(per_batch):
            screen_arguments(gate, "gh_create_issue", tool, "gh", "create_issue", TEN_ARGUMENTS, None)
        per_call.append((time.perf_counter() - started) / per_batch)
    return {
        "catalog_tools": len(catalog.tools),
        "catalog_build_ms": {"validate_warn": with_gates * 1000, "validate_off": without * 1000},
        "first_call_10_fields_us": {
            "median": statistics.median(first) * 1e6,
            "p99": percentile(first, 0.99) * 1e6,
        },
        "check_10_fields_us": {
            "median": statistics.median(per_call) * 1e6,
            "p99": percentile(per_call, 0.99) * 1e6,
        },
    }


def passing(options: dict[str, Any]) -> Any:
    async def middleware(call: Call, next_: Next) -> types.CallToolResult:
        return await next_(call)

    return middleware


async def passing_on_asyncio(call: Call, next_: Any) -> types.CallToolResult:
    result: types.CallToolResult = await next_(call)
    return result


async def chain_cost(batches: int, per_batch: int) -> dict[str, Any]:
    """Microseconds per call added by each chain (the call itself answers at once)."""
    answer = types.CallToolResult(content=[types.TextContent(type="text", text="echo: hello there")])

    async def backend(call: Call) -> types.CallToolResult:
        return answer

    call = Call(
        server="bench", tool="echo", exposed="bench_echo", arguments={"text": "hello"}, client="bench"
    )
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        shipped = {
            "rate_limit": MiddlewareSpec(
                name="rate_limit", use="rate_limit", options={"calls": 10**9, "concurrency": 64}
            ),
            "redact": MiddlewareSpec(name="redact", use="redact", options={"keys": ["password"]}),
            "audit": MiddlewareSpec(name="audit", use="audit", options={"path": f"{tmp}/audit.jsonl"}),
        }
        host = AsyncioHost()
        middlewares = Middlewares(host)

        def built(*specs: MiddlewareSpec) -> Chain:
            chain = middlewares.chain(specs, "bench", ("bench_echo",))
            assert chain is not None
            return chain

        async def plain(call: Call, forward: Next) -> types.CallToolResult:
            return await forward(call)

        cases: dict[str, Any] = {
            "none": plain,
            "1 pass-through": Chain((passing_layer(),)).run,
            "3 pass-through": Chain((passing_layer(), passing_layer(), passing_layer())).run,
            **{name: built(spec).run for name, spec in shipped.items()},
            "rate_limit+redact+audit": built(*shipped.values()).run,
        }
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            host.want()
            asyncio_chain = Chain((asyncio_layer(host),))
            cases["1 asyncio pass-through"] = asyncio_chain.run
            for label, run in cases.items():
                per_call: list[float] = []
                for _ in range(2):  # warm-up (the asyncio loop opens on the first call)
                    await run(call, backend)
                # a round trip to the asyncio loop costs ~100x more: fewer calls a batch
                count = max(1, per_batch // 20) if "asyncio" in label else per_batch
                for _ in range(batches):
                    started = time.perf_counter()
                    for _ in range(count):
                        await run(call, backend)
                    per_call.append((time.perf_counter() - started) / count)
                figures[label] = {
                    "median_us": statistics.median(per_call) * 1e6,
                    "p99_us": percentile(per_call, 0.99) * 1e6,
                }
            nursery.cancel_scope.cancel()
    return figures


def passing_layer() -> Layer:
    return Layer("pass", passing({}))


def asyncio_layer(host: AsyncioHost) -> Layer:
    return Layer("asyncio-pass", host.wrap(passing_on_asyncio))


def backend_params() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(BENCH / "bench_server.py"), "--tools", "10"]
    )


#: What each end-to-end path adds to the configuration.
PATHS: dict[str, str] = {
    "off": '[settings]\nvalidate = "off"\n',
    "warn": '[settings]\nvalidate = "warn"\n',
    "strict": '[settings]\nvalidate = "strict"\n',
    # middleware configured, but not around the echo tool: the echo call keeps the raw lane
    "elsewhere": '[settings]\nvalidate = "off"\n\n[[middleware]]\nuse = "rate_limit"\n'
    'tools = ["*_never_called"]\noptions = { calls = 5 }\n',
    # the three shipped middlewares around it
    "chain": '[settings]\nvalidate = "off"\n\n'
    '[[middleware]]\nuse = "audit"\noptions = { path = "AUDIT" }\n\n'
    '[[middleware]]\nuse = "redact"\noptions = { keys = ["password"] }\n\n'
    '[[middleware]]\nuse = "rate_limit"\noptions = { calls = 1000000000, concurrency = 64 }\n',
}


def assern_params(workdir: Path, path: str) -> StdioServerParameters:
    folder = workdir / path
    folder.mkdir()
    config = folder / "config.toml"
    config.write_text(
        PATHS[path].replace("AUDIT", str(folder / "audit.jsonl")) + "\n[servers.bench]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(BENCH / "bench_server.py"))}, "--tools", "10"]\n'
    )
    assern = shutil.which("assern", path=str(Path(sys.executable).parent)) or "assern"
    env = {
        "ASSERN_HOME": str(folder / "home"),
        "ASSERN_NO_INSTANCE_SHARING": "1",
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(workdir)),
    }
    return StdioServerParameters(command=assern, args=["serve", "--config", str(config)], env=env)


#: The paths a smoke run takes: the raw lane, validation and the middleware chain (the
#: others differ from these in configuration only).
SMOKE_PATHS = ("off", "strict", "chain")


async def end_to_end(blocks: int, calls: int, measured: tuple[str, ...] = tuple(PATHS)) -> dict[str, Any]:
    paths = ["direct", *measured]
    samples: dict[str, list[float]] = {path: [] for path in paths}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        async with contextlib.AsyncExitStack() as stack:
            clients = {"direct": (await stack.enter_async_context(Client(backend_params())), "echo")}
            for path in measured:
                client = await stack.enter_async_context(Client(assern_params(work, path)))
                clients[path] = (client, "bench_echo")
            for client, name in clients.values():
                for i in range(20):  # warm-up
                    await client.call_tool(name, {"text": f"warm {i}"})
            for block in range(blocks):
                order = paths[block % len(paths) :] + paths[: block % len(paths)]
                for path in order:
                    client, name = clients[path]
                    for i in range(calls):
                        started = time.perf_counter()
                        result = await client.call_tool(name, {"text": f"ping {i}"})
                        samples[path].append(time.perf_counter() - started)
                        if result.is_error:
                            raise RuntimeError(f"{path}: {result}")
    figures: dict[str, Any] = {}
    base = statistics.median(samples["direct"])
    for path in paths:
        median = statistics.median(samples[path])
        figures[path] = {
            "median_ms": median * 1000,
            "p99_ms": percentile(samples[path], 0.99) * 1000,
            "overhead_ms": (median - base) * 1000,
            "calls": len(samples[path]),
        }
    return figures


def main() -> int:
    # The figures are the output: the actors' log lines (the asyncio loop opening) are not.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help="a few iterations of each part, three of the end-to-end paths"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures: dict[str, Any] = {"tokens": tokens_per_exposure()}
    t = figures["tokens"]
    print(f"tools/list of {t['tools']} tools on {t['servers']} servers, estimated tokens:")
    for label in ("all", "grouped", "grouped_toon", "search"):
        print(f"  {label:<13} {t[label]['tokens']:>8,} tokens, {t[label]['listed']:>4} tools listed")
    figures["validation"] = validation_cost(5 if args.smoke else 200, 100 if args.smoke else 2000)
    v = figures["validation"]
    print(
        f"catalog of {v['catalog_tools']} tools built with their schemas checked: "
        f"{v['catalog_build_ms']['validate_warn']:.1f} ms median "
        f"(without: {v['catalog_build_ms']['validate_off']:.1f} ms)"
    )
    first = v["first_call_10_fields_us"]
    print(
        f"first call of a 10-field tool (compiles its schema): {first['median']:.1f} us median, "
        f"{first['p99']:.1f} us p99"
    )
    check = v["check_10_fields_us"]
    print(f"checking a valid 10-field call: {check['median']:.2f} us median, {check['p99']:.2f} us p99")
    figures["middleware"] = trio.run(chain_cost, 5 if args.smoke else 200, 100 if args.smoke else 2000)
    print("middleware chain around a call that answers at once, added per call:")
    for label, row in figures["middleware"].items():
        print(f"  {label:<24} median {row['median_us']:7.2f} us, p99 {row['p99_us']:7.2f} us")
    if args.smoke:
        figures["end_to_end"] = trio.run(end_to_end, 2, 10, SMOKE_PATHS)
    else:
        figures["end_to_end"] = trio.run(end_to_end, 10, 200)
    print("per call through assern serve (echo, one backend):")
    for path, row in figures["end_to_end"].items():
        print(
            f"  {path:<9} median {row['median_ms']:.3f} ms, p99 {row['p99_ms']:.3f} ms, "
            f"over direct {row['overhead_ms']:+.3f} ms ({row['calls']} calls)"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
