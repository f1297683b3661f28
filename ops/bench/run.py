"""assern and its peers, side by side in one run: cold start, lists, calls, throughput,
memory, a killed backend, and instance sharing.

    python ops/bench/run.py                        # everything (sets up the peers first)
    python ops/bench/run.py --only assern          # one aggregator (plus direct)
    python ops/bench/run.py --smoke                # K=1, few iterations, assern only
    python ops/bench/run.py --json out.json        # also write every figure as JSON

See ops/bench/README.md for what each figure means and how to read the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp import Client
from mcp.client.session_group import ClientSessionGroup
from mcp.client.stdio import StdioServerParameters

# isort: split
# ops/bench is this script's directory, so its modules import by their plain names.
import list_probe
import measure
import peers
import procs
import report
from measure import Caller, CallFailed, short_error
from wire import SpawnedServer

BASES = ("echo", "sleep")
#: in-flight calls for the throughput figure
IN_FLIGHT = 32
#: seconds between the second kill of a backend and the call that follows (measure.later_call):
#: longer than assern's start-up plus its backoff before a second restart (0.1 s)
LATER_CALL_QUIET = 2.0
#: at most this long, before each aggregator, for the CPUs to be idle (procs.wait_quiet)
QUIET_LIMIT = 5.0


@attrs.frozen
class Scenario:
    backends: int
    tools: int
    #: per-call: alternating blocks of `block` calls per path, for at most `call_budget` s
    blocks: int
    block: int = 100
    call_budget: float = 8.0
    sharing: bool = False

    @property
    def label(self) -> str:
        return f"K={self.backends} x {self.tools} tools"


@attrs.frozen
class Plan:
    scenarios: tuple[Scenario, ...]
    lists: int = 50
    #: seconds after which a path stops adding lists (at least 10)
    list_budget: float = 5.0
    warmup: int = 50
    window: float = 1.0
    rounds: int = 2
    crash_bound: float = 5.0
    #: hard limit for one aggregator in one scenario
    limit: float = 100.0
    #: no aggregator starts once the run is this old (keeps a full run under 10 minutes)
    run_budget: float = 480.0
    visible_limit: float = 60.0
    #: tools/list answers timed by the bare client of list_probe.py, per aggregator started
    probe_lists: int = 200
    #: at most this long, before each aggregator, for the CPUs to be idle
    quiet_limit: float = QUIET_LIMIT
    cuts: tuple[str, ...] = ()


FULL = Plan(
    scenarios=(
        Scenario(1, 10, blocks=4),
        Scenario(5, 10, blocks=4, sharing=True),
        Scenario(20, 10, blocks=10, call_budget=15.0),
        Scenario(20, 50, blocks=4),
    ),
    cuts=(
        "per-call: 1000 calls per path at K=20 x 10 tools (the target line), 400 at the other sizes; "
        "a path stops adding block pairs after 15 s (K=20 x 10) or 8 s (the others): the JSON has n",
        "tools/list: 50 lists, or as many as fit in 5 s (at least 10)",
        "throughput: 2 windows of 1 s per path, alternating",
        "crash: recovery watched for at most 5 s after the kill",
        "sharing: measured at K=5 x 10 tools only",
        "tools/list on raw pipes: 200 answers per shape, assern only",
    ),
)
SMOKE = Plan(
    scenarios=(Scenario(1, 10, blocks=2, block=5),),
    lists=5,
    warmup=2,
    window=0.3,
    rounds=1,
    limit=60.0,
    visible_limit=30.0,
    probe_lists=5,
    # the test suite's machine is never idle: waiting 5 s for it only slows the suite
    quiet_limit=0.5,
    cuts=("smoke mode: K=1, few iterations, assern only, no sharing, 0.5 s for idle CPUs",),
)


class Changes:
    """list_changed notifications, as something to wait for."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


def listening_client(transport: Any, changes: Changes | None = None, mode: str = "legacy") -> Client:
    """The official client over `transport`, in protocol `mode`, telling `changes` of
    every list_changed."""

    async def on_message(message: Any) -> None:
        if changes is not None and isinstance(message, types.ToolListChangedNotification):
            changes.notify()

    return Client(transport, mode=mode, cache=None, message_handler=on_message)  # type: ignore[arg-type]


def client_caller(client: Client, names: dict[tuple[int, str], str]) -> Caller:
    async def call(index: int, base: str, arguments: dict[str, Any]) -> None:
        result = await client.call_tool(names[index, base], arguments)
        if result.is_error:
            raise CallFailed(" ".join(getattr(c, "text", "") for c in result.content))

    return call


# ------------------------------------------------------------------ direct path


@contextlib.asynccontextmanager
async def direct_pool(
    backends: Sequence[peers.Backend], workdir: Path, mode: str = "legacy"
) -> AsyncIterator[Caller]:
    """Direct connections (the official client over stdio) to fresh copies of `backends`.

    They use the same transport as the aggregators, so both paths run the same client
    code. Each connection is opened and closed by a task of its own (SDK contexts stay
    in their task), all at once; the caller routes backend i to connection i.
    """
    clients: list[Client | None] = [None] * len(backends)
    done = trio.Event()
    ready = trio.Semaphore(0)

    async def hold(i: int, backend: peers.Backend) -> None:
        server = SpawnedServer(
            [backend.command, *backend.args],
            env=peers.base_env(),
            stderr=workdir / f"{backend.name}.stderr",
            watch_every=None,
        )
        async with listening_client(server.connect(), mode=mode) as client:
            clients[i] = client
            ready.release()
            await done.wait()

    async with trio.open_nursery() as nursery:
        for i, backend in enumerate(backends):
            nursery.start_soon(hold, i, backend)
        for _ in backends:
            await ready.acquire()

        async def call(index: int, base: str, arguments: dict[str, Any]) -> None:
            client = clients[index]
            assert client is not None
            result = await client.call_tool(base, arguments)
            if result.is_error:
                raise CallFailed(" ".join(getattr(c, "text", "") for c in result.content))

        try:
            yield call
        finally:
            done.set()


async def direct_list(scenario: Scenario, plan: Plan, workdir: Path) -> dict[str, Any]:
    """tools/list straight from one server that has as many tools as the whole scenario.

    The baseline of the aggregators' list latency: what the same client spends on a list
    of that size (reading, parsing, validating it) when nothing aggregates it.
    """
    [backend] = peers.bench_backends(1, scenario.backends * scenario.tools, prefix="dlist")
    server = SpawnedServer(
        [backend.command, *backend.args],
        env=peers.base_env(),
        stderr=workdir / "dlist.stderr",
        watch_every=None,
    )
    async with Client(server.connect(), mode="legacy", cache=None) as client:

        async def list_names() -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

        for _ in range(plan.warmup // 10 or 1):
            await list_names()
        server.list_first_bytes.clear()
        with measure.gc_held():
            figures = await measure.list_latency(list_names, plan.lists, plan.list_budget)
        if server.list_first_bytes:
            figures["first_byte"] = measure.summary_ms(server.list_first_bytes)
        return figures


# ------------------------------------------------------------ one aggregator


@contextlib.asynccontextmanager
async def py_spy(pid: int, out: Path | None) -> AsyncIterator[None]:
    """Record `pid` with py-spy while the block runs, if asked: raw folded stacks, sampled
    only while a thread holds the GIL (where its CPU goes, not where it waits)."""
    spy = Path(sys.executable).with_name("py-spy")
    if out is None or not spy.exists():
        yield
        return
    argv = [str(spy), "record", "-p", str(pid), "-f", "raw", "-o", str(out)]
    argv += ["--rate", "250", "--nonblocking", "--gil"]
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()


def backend_killer(root: int, name: str) -> Callable[[], bool]:
    def kill() -> bool:
        pid = procs.find_backend(root, name)
        if pid is None:
            return False
        os.kill(pid, signal.SIGKILL)
        return True

    return kill


def crash_recovered(out: dict[str, Any]) -> bool:
    """Whether the crash step saw the killed backend answer again (then it can die again)."""
    crash = out.get("crash")
    return isinstance(crash, dict) and crash.get("recovered_s") is not None


async def step(out: dict[str, Any], key: str, work: Callable[[], Awaitable[Any]]) -> None:
    """Run one measurement, with the harness's GC held off; its failure is recorded and
    the others still run."""
    try:
        with measure.gc_held():
            out[key] = await work()
    except Exception as exc:
        out[key] = {"error": short_error(exc)}


async def run_aggregator(
    agg: peers.Aggregator,
    scenario: Scenario,
    plan: Plan,
    direct: Caller,
    workdir: Path,
    spy_dir: Path | None,
) -> dict[str, Any]:
    """Spawn one aggregator over `scenario`'s backends and measure it, step by step."""
    backends = peers.bench_backends(scenario.backends, scenario.tools)
    names = [b.name for b in backends]
    launch = agg.launch(workdir, workdir / "backends.json", backends)
    server = SpawnedServer(launch.argv, env=launch.env, cwd=workdir, stderr=workdir / f"{agg.name}.stderr")
    changes = Changes()
    out: dict[str, Any] = {"status": "ok", "argv": launch.argv}
    with trio.move_on_after(plan.limit) as limit:
        try:
            async with listening_client(server.connect(), changes) as client:
                out["initialize_s"] = time.perf_counter() - server.spawned_at

                async def list_names() -> list[str]:
                    return [tool.name for tool in (await client.list_tools()).tools]

                found, when, lists = await measure.until_all_visible(
                    list_names, names, BASES, changes.wait, plan.visible_limit
                )
                out["all_visible_s"] = None if when is None else when - server.spawned_at
                out["cpu_until_visible_s"] = procs.cpu_seconds(server.pid)
                out["lists_until_visible"] = lists
                if when is None:
                    out["status"] = f"only {len(found)} of {len(names) * len(BASES)} tools visible"
                else:
                    spy_file = (
                        spy_dir / f"{agg.name}-{scenario.backends}x{scenario.tools}.txt" if spy_dir else None
                    )
                    async with py_spy(server.pid, spy_file):
                        await serving(
                            out, scenario, plan, direct, client_caller(client, found), list_names, server
                        )
                    await step(
                        out,
                        "crash",
                        lambda: measure.crash(
                            client_caller(client, found),
                            scenario.backends,
                            backend_killer(server.pid, names[-1]),
                            plan.crash_bound,
                        ),
                    )
                    if crash_recovered(out):
                        await step(
                            out,
                            "later_call",
                            lambda: measure.later_call(
                                client_caller(client, found),
                                scenario.backends,
                                backend_killer(server.pid, names[-1]),
                                LATER_CALL_QUIET,
                                plan.crash_bound,
                            ),
                        )
        except Exception as exc:
            out["status"] = "failed: " + short_error(exc)
    if limit.cancelled_caught:
        out["status"] = f"stopped at the {plan.limit:g} s limit for one aggregator"
    out["leftover_processes"] = len(server.leftover)
    return out


async def serving(
    out: dict[str, Any],
    scenario: Scenario,
    plan: Plan,
    direct: Caller,
    through: Caller,
    list_names: measure.ListTools,
    server: SpawnedServer,
) -> None:
    """The measures of a running aggregator: lists, calls, throughput, then its memory.

    The tree's memory is sampled before and after them, not while they are timed.
    """
    assert server.watch is not None
    with server.watch.paused():
        server.list_first_bytes.clear()
        await step(out, "list", lambda: measure.list_latency(list_names, plan.lists, plan.list_budget))
        if server.list_first_bytes:
            out["list_first_byte"] = measure.summary_ms(server.list_first_bytes)
        out["list_bytes"] = len(server.list_line)
        if server.list_line:
            out["list_client_parse"] = measure.client_parse(server.list_line)
        cpu = functools.partial(procs.cpu_seconds, server.pid)
        await step(
            out,
            "call",
            lambda: measure.per_call(
                direct, through, scenario.blocks, scenario.block, plan.warmup, scenario.call_budget, cpu
            ),
        )
        await step(
            out,
            "throughput",
            lambda: measure.throughput(
                direct, through, scenario.backends, IN_FLIGHT, plan.window, plan.rounds, cpu
            ),
        )
    out["rss"] = {
        "aggregator_peak_mb": procs.peak_rss_kb(server.pid) / 1024,
        "tree_peak_mb": server.watch.peak_tree_kb / 1024,
        "tree_peak_members": [
            {"pid": pid, "command": command, "mb": kb / 1024}
            for pid, command, kb in server.watch.peak_members
        ],
        "tree_processes": len(procs.descendants(server.pid)) + 1,
    }


# ---------------------------------------------------------- the SDK's group


async def run_group(scenario: Scenario, plan: Plan, direct: Caller) -> dict[str, Any]:
    """ClientSessionGroup in this process: connect every backend, then list and call."""
    backends = peers.bench_backends(scenario.backends, scenario.tools)
    out: dict[str, Any] = {"status": "ok", "initialize_s": None}
    with trio.move_on_after(plan.limit) as limit:
        try:
            started = time.perf_counter()
            async with ClientSessionGroup(
                component_name_hook=lambda name, info: f"{info.name}_{name}"
            ) as group:
                for backend in backends:
                    params = StdioServerParameters(
                        command=backend.command, args=list(backend.args), env=peers.base_env()
                    )
                    await group.connect_to_server(params)
                found = measure.exposed_names(list(group.tools), [b.name for b in backends], BASES)
                out["all_visible_s"] = time.perf_counter() - started

                async def list_names() -> list[str]:
                    return [tool.name for tool in group.tools.values()]

                async def through(index: int, base: str, arguments: dict[str, Any]) -> None:
                    result = await group.call_tool(found[index, base], arguments)
                    if result.is_error:
                        raise CallFailed(" ".join(getattr(c, "text", "") for c in result.content))

                await step(
                    out, "list", lambda: measure.list_latency(list_names, plan.lists, plan.list_budget)
                )
                await step(
                    out,
                    "call",
                    lambda: measure.per_call(
                        direct, through, scenario.blocks, scenario.block, plan.warmup, scenario.call_budget
                    ),
                )
                await step(
                    out,
                    "throughput",
                    lambda: measure.throughput(
                        direct, through, scenario.backends, IN_FLIGHT, plan.window, plan.rounds
                    ),
                )
                victim = backends[-1].name
                await step(
                    out,
                    "crash",
                    lambda: measure.crash(
                        through, scenario.backends, backend_killer(os.getpid(), victim), plan.crash_bound
                    ),
                )
        except Exception as exc:
            out["status"] = "failed: " + short_error(exc)
    if limit.cancelled_caught:
        out["status"] = f"stopped at the {plan.limit:g} s limit for one aggregator"
    return out


# ------------------------------------------------------------------- sharing


async def run_sharing(scenario: Scenario, plan: Plan, workdir: Path) -> dict[str, Any]:
    """A primary `assern serve` with sharing on, then a second one: its initialize and list.

    Sharing works when the primary's socket appears in $ASSERN_HOME/run and the second
    serve answers with every tool while starting no backend of its own.
    """
    backends = peers.bench_backends(scenario.backends, scenario.tools)
    names = [b.name for b in backends]
    home = workdir / "sharing-home"
    launch = peers.ASSERN.launch(workdir, workdir / "backends.json", backends)
    env = {k: v for k, v in launch.env.items() if k != "ASSERN_NO_INSTANCE_SHARING"} | {
        "ASSERN_HOME": str(home)
    }
    primary = SpawnedServer(launch.argv, env=env, cwd=workdir, stderr=workdir / "sharing-primary.stderr")
    changes = Changes()
    out: dict[str, Any] = {}
    with trio.move_on_after(plan.limit) as limit:
        try:
            async with listening_client(primary.connect(), changes) as first:

                async def first_names() -> list[str]:
                    return [tool.name for tool in (await first.list_tools()).tools]

                _, when, _ = await measure.until_all_visible(
                    first_names, names, BASES, changes.wait, plan.visible_limit
                )
                if when is None:
                    return {"status": "n/a: the primary did not list every backend"}
                sockets: list[Path] = []
                with trio.move_on_after(5):
                    # Polling the file system: there is no event to wait for.
                    while not (sockets := sorted((home / "run").glob("*.sock"))):  # noqa: ASYNC110
                        await trio.sleep(0.05)
                if not sockets:
                    return {"status": "n/a: no $ASSERN_HOME/run/*.sock appeared (no instance sharing here)"}
                out["socket"] = sockets[0].name
                second = SpawnedServer(
                    launch.argv, env=env, cwd=workdir, stderr=workdir / "sharing-2nd.stderr"
                )
                async with listening_client(second.connect(), Changes()) as client:
                    out["initialize_s"] = time.perf_counter() - second.spawned_at
                    listed = [tool.name for tool in (await client.list_tools()).tools]
                    out["tools_list_s"] = time.perf_counter() - second.spawned_at
                    seen = measure.exposed_names(listed, names, BASES)
                    own = [
                        p
                        for p in procs.descendants(second.pid)
                        if "bench_server.py" in " ".join(procs.cmdline(p))
                    ]
                    out["second_rss_mb"] = procs.peak_rss_kb(second.pid) / 1024
                    out["second_backends"] = len(own)
                if own:
                    out["status"] = f"n/a: the second serve started {len(own)} backends of its own (no proxy)"
                elif len(seen) < len(names) * len(BASES):
                    out["status"] = (
                        f"n/a: the second serve listed {len(seen)} of {len(names) * len(BASES)} tools"
                    )
                else:
                    out["status"] = "ok"
        except Exception as exc:
            out["status"] = "n/a: " + short_error(exc)
    if limit.cancelled_caught:
        out["status"] = f"n/a: stopped at the {plan.limit:g} s limit"
    return out


# ------------------------------------------------------- tools/list, bare client


async def run_list_probe(scenario: Scenario, plan: Plan, workdir: Path) -> dict[str, Any]:
    """assern's own time to answer tools/list (list_probe.py), with the scenario's K
    backends and, for K > 1, with one backend that has all their tools (the same list)."""
    total = scenario.backends * scenario.tools
    shapes = {"k": peers.bench_backends(scenario.backends, scenario.tools, prefix="p")}
    if scenario.backends > 1:
        shapes["one"] = peers.bench_backends(1, total, prefix="q")
    probes: dict[str, list_probe.Shape] = {}
    for key, backends in shapes.items():
        folder = workdir / f"list-probe-{key}"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "backends.json"
        config.write_text(json.dumps(peers.mcp_servers(backends), indent=2))
        launch = peers.ASSERN.launch(folder, config, backends)
        probes[key] = list_probe.Shape(launch.argv, launch.env, folder / "assern.stderr")
    try:
        return await trio.to_thread.run_sync(
            functools.partial(list_probe.probe, probes, total, plan.probe_lists, quiet=plan.quiet_limit)
        )
    except Exception as exc:
        return {key: {"error": short_error(exc)} for key in probes}


# --------------------------------------------------------------------- a run


async def run_scenario(
    index: int,
    scenario: Scenario,
    plan: Plan,
    aggregators: Sequence[str],
    usable: dict[str, bool],
    direct: Caller,
    workdir: Path,
    spy_dir: Path | None,
    run_started: float,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "label": scenario.label,
        "backends": scenario.backends,
        "tools_per_backend": scenario.tools,
        "loadavg_before": procs.loadavg(),
        "results": {},
    }
    started = time.perf_counter()
    workdir = workdir / f"{scenario.backends}x{scenario.tools}"
    workdir.mkdir(parents=True, exist_ok=True)
    backends = peers.bench_backends(scenario.backends, scenario.tools)
    (workdir / "backends.json").write_text(json.dumps(peers.mcp_servers(backends), indent=2))
    print(f"  {scenario.label}: direct tools/list …", file=sys.stderr, flush=True)
    try:
        listed_directly: dict[str, Any] = await direct_list(scenario, plan, workdir)
    except Exception as exc:
        listed_directly = {"error": short_error(exc)}
    # The order turns by one each size, so that no aggregator always starts first, just
    # after the previous size's processes were stopped; and each starts on a quiet machine.
    turn = index % len(aggregators) if aggregators else 0
    order = [*aggregators[turn:], *aggregators[:turn]]
    result["order"] = order
    for name in order:
        print(f"  {scenario.label}: {name} …", file=sys.stderr, flush=True)
        quiet_wait = await procs.wait_quiet(plan.quiet_limit)
        began = time.perf_counter()
        if not usable.get(name, True):
            result["results"][name] = {"status": "not run: not installed (see peers)"}
            continue
        if began - run_started > plan.run_budget:
            result["results"][name] = {
                "status": f"skipped: the run was past its {plan.run_budget:g} s budget"
            }
            continue
        if name == peers.GROUP:
            result["results"][name] = await run_group(scenario, plan, direct)
        else:
            agg = next(a for a in peers.PROCESS_AGGREGATORS if a.name == name)
            result["results"][name] = await run_aggregator(agg, scenario, plan, direct, workdir, spy_dir)
        result["results"][name]["seconds"] = time.perf_counter() - began
        result["results"][name]["quiet_wait_s"] = quiet_wait
        result["results"][name]["list_direct"] = listed_directly
    if peers.ASSERN.name in result["results"] and "seconds" in result["results"][peers.ASSERN.name]:
        print(f"  {scenario.label}: tools/list, bare client …", file=sys.stderr, flush=True)
        result["results"][peers.ASSERN.name]["list_probe"] = await run_list_probe(scenario, plan, workdir)
        if scenario.sharing:
            print(f"  {scenario.label}: sharing …", file=sys.stderr, flush=True)
            began = time.perf_counter()
            sharing = await run_sharing(scenario, plan, workdir)
            sharing["seconds"] = time.perf_counter() - began
        else:
            sharing = {"status": "not measured at this size"}
        result["results"][peers.ASSERN.name]["sharing"] = sharing
    result["loadavg_after"] = procs.loadavg()
    result["seconds"] = time.perf_counter() - started
    return result


def git_describe() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + working tree changes' if dirty else ''}" if head else "unknown"


def set_up_peers(aggregators: Sequence[str]) -> tuple[dict[str, str], dict[str, bool]]:
    status: dict[str, str] = {
        peers.ASSERN.name: f"assern {git_describe()} (this checkout, {sys.executable})",
        peers.GROUP: f"mcp {version('mcp')} ClientSessionGroup, in this process",
    }
    usable: dict[str, bool] = {}
    for agg in (peers.FASTMCP, peers.MAGG):
        if agg.name not in aggregators or agg.peer is None:
            continue
        print(f"setting up {agg.name} …", file=sys.stderr, flush=True)
        usable[agg.name], status[agg.name] = peers.setup_peer(
            agg.peer, peers.PEERS_DIR / f"{agg.name}-install.log"
        )
    return {k: v for k, v in status.items() if k in aggregators}, usable


async def run_all(
    plan: Plan, aggregators: Sequence[str], spy_dir: Path | None, keep: Path | None
) -> dict[str, Any]:
    started = time.perf_counter()
    peer_status, usable = set_up_peers(aggregators)
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}",
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "loadavg_before": procs.loadavg(),
        "cuts": list(plan.cuts),
        "in_flight": IN_FLIGHT,
    }
    scenarios = []
    with contextlib.ExitStack() as stack:
        if keep is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="assern-bench-")))
        else:
            workdir = keep
            workdir.mkdir(parents=True, exist_ok=True)
        # One set of direct backends for the whole run, as many as the largest size has.
        most = max(s.backends for s in plan.scenarios)
        direct_backends = peers.bench_backends(most, 10, prefix="d")
        print(f"starting {most} direct backends …", file=sys.stderr, flush=True)
        began = time.perf_counter()
        async with direct_pool(direct_backends, workdir) as direct:
            meta["direct_ready_s"] = time.perf_counter() - began
            for index, scenario in enumerate(plan.scenarios):
                print(f"{scenario.label} …", file=sys.stderr, flush=True)
                scenarios.append(
                    await run_scenario(
                        index, scenario, plan, aggregators, usable, direct, workdir, spy_dir, started
                    )
                )
    meta["loadavg_after"] = procs.loadavg()
    meta["seconds"] = time.perf_counter() - started
    return {"meta": meta, "peers": peer_status, "aggregators": list(aggregators), "scenarios": scenarios}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--smoke", action="store_true", help="K=1, few iterations, assern only (the test suite)"
    )
    parser.add_argument(
        "--only", action="append", choices=peers.ALL_NAMES, help="measure only this aggregator (repeatable)"
    )
    parser.add_argument(
        "--size",
        action="append",
        metavar="KxTOOLS",
        help="only this scenario, e.g. 20x10 (repeatable; default: 1x10 5x10 20x10 20x50)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--py-spy", type=Path, metavar="DIR", help="record each aggregator with py-spy into DIR"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="work in DIR and keep it (configs, logs, stderr of every process)",
    )
    args = parser.parse_args(argv)
    # ClientSessionGroup warns for every backend without prompts or resources: not news.
    logging.basicConfig(level=logging.ERROR)

    plan = SMOKE if args.smoke else FULL
    aggregators = list(args.only or ([peers.ASSERN.name] if args.smoke else peers.ALL_NAMES))
    if args.size:
        known = {(s.backends, s.tools): s for s in plan.scenarios}
        chosen = []
        for size in args.size:
            backends, tools = (int(n) for n in size.lower().split("x"))
            chosen.append(known.get((backends, tools), Scenario(backends, tools, blocks=4)))
        plan = attrs.evolve(plan, scenarios=tuple(chosen))
    if args.py_spy:
        args.py_spy.mkdir(parents=True, exist_ok=True)
    result = trio.run(run_all, plan, aggregators, args.py_spy, args.keep)
    print(report.render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
