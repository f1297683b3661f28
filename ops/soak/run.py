"""Soak: many calls at once through one client while backends are killed and the config reloads.

    .venv/bin/python ops/soak/run.py                  # 120 s, 32 calls in flight, 3 backends
    .venv/bin/python ops/soak/run.py --duration 600 --json soak.json
    .venv/bin/python ops/soak/run.py --duration 4 --warmup 1 --timeout 2 --drop-one-answer  # 1 lost

One official `mcp` client keeps `--concurrency` tool calls in flight through `assern
serve` (isolated, private ASSERN_HOME) across three backends (ops/bench/bench_server.py).
After a quiet warm-up, one backend is killed with SIGKILL every `--kill-every` seconds
(in turn) and assern is sent SIGHUP (a config reload) every `--reload-every` seconds.
Each call has the backends' timeout (`--timeout`); a call with no answer within that
plus 5 s is *hung*. *Lost* is counted apart from the calls' own books, at the client's
transport: every `tools/call` request written to assern's stdin and every answer read
from its stdout, by id (`Wire`); a request still without an answer when the run ends is
lost, whatever became of the call that sent it (a hung call's answer that never came
is lost too). `--drop-one-answer` is the fault that proves the count: the transport
drops one answer before the client sees it, so that call hangs and the run must report
1 lost (the test suite runs a short soak with it and without).

It prints: calls answered OK and with an error, hung and lost calls, backend restarts,
the latency of calls to backends that were not being killed (median, p99 and max, during
the warm-up and during the kills), and assern's open file descriptors and RSS at the
start and the end. Targets: 0 hung, 0 lost, the healthy backends' p99 during kills
within noise of the warm-up's, no growth of fds or memory beyond noise. These are
figures, never assertions: the test suite runs this only as a short smoke.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import attrs
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCRequest, JSONRPCResponse

HERE = Path(__file__).resolve().parent
BENCH_SERVER = HERE.parent / "bench" / "bench_server.py"
BACKENDS = ("s1", "s2", "s3")
#: the answer `--drop-one-answer` drops: one read during the warm-up of any run
DROPPED_ANSWER = 10


@attrs.define
class Call:
    backend: str
    started: float
    ended: float | None = None
    ok: bool = False
    hung: bool = False


@attrs.define
class Books:
    calls: list[Call] = attrs.field(factory=list)
    #: (trio time, backend) of each kill
    kills: list[tuple[float, str]] = attrs.field(factory=list)
    reloads: int = 0
    kills_started: float | None = None
    #: every backend process seen: one more than the first three for each restart
    pids: set[int] = attrs.field(factory=set)

    def look(self) -> None:
        for name in BACKENDS:
            self.pids.update(pids_of(f"--name {name}"))


@attrs.define
class Wire:
    """The `tools/call` requests written to assern and the answers read from it, by id.

    Kept by the client's transport (`TapRead`, `TapWrite`), not by the calls: a call that
    ends, fails or hangs says nothing here, only what crossed the pipes does.
    `drop_answer`: the fault, the 1-based rank of the `tools/call` answer to drop (None:
    drop nothing)."""

    drop_answer: int | None = None
    written: set[str | int] = attrs.field(factory=set)
    answered: set[str | int] = attrs.field(factory=set)
    dropped: list[str | int] = attrs.field(factory=list)

    def wrote(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest) and message.method == "tools/call":
            self.written.add(message.id)

    def read(self, message: JSONRPCMessage) -> bool:
        """Note an answer read; False when the fault drops it (the client must not see it)."""
        if not isinstance(message, JSONRPCResponse | JSONRPCError) or message.id not in self.written:
            return True
        if self.drop_answer is not None and len(self.answered) + len(self.dropped) + 1 == self.drop_answer:
            self.dropped.append(message.id)
            return False
        self.answered.add(message.id)
        return True

    def unanswered(self) -> set[str | int]:
        """The requests written whose answer never reached the client."""
        return self.written - self.answered


class TapWrite:
    """The client's write stream, noting each message in the `Wire` as it is written."""

    def __init__(self, inner: Any, wire: Wire) -> None:  # the SDK's WriteStream[SessionMessage]
        self.inner, self.wire = inner, wire

    async def send(self, item: SessionMessage, /) -> None:
        self.wire.wrote(item.message)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class TapRead:
    """The client's read stream, noting each answer in the `Wire` as it is read (and
    holding back the one the fault drops)."""

    def __init__(self, inner: Any, wire: Wire) -> None:  # the SDK's ReadStream[SessionMessage | Exception]
        self.inner, self.wire = inner, wire

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self.inner.receive()
            if self.keeps(item):
                return item

    @property
    def last_context(self) -> Any:
        """The inner stream's sender context, which the SDK's dispatcher reads when a
        stream carries one."""
        return getattr(self.inner, "last_context", None)

    def keeps(self, item: Any) -> bool:
        return not isinstance(item, SessionMessage) or self.wire.read(item.message)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        while True:
            # the inner stream's StopAsyncIteration ends ours
            item: SessionMessage | Exception = await self.inner.__anext__()
            if self.keeps(item):
                return item

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def tapped(params: StdioServerParameters, wire: Wire) -> AsyncIterator[tuple[TapRead, TapWrite]]:
    """The SDK's stdio transport to `params`, its two streams tapped into `wire`."""
    async with stdio_client(params) as (read, write):
        yield TapRead(read, wire), TapWrite(write, wire)


def write_config(path: Path, timeout: float) -> None:
    tables = [
        f'[servers.{name}]\ncommand = "{sys.executable}"\n'
        f'args = ["{BENCH_SERVER}", "--tools", "4", "--name", "{name}"]\n'
        f"timeout = {timeout}\n"
        for name in BACKENDS
    ]
    path.write_text("\n".join(tables))


def pids_of(fragment: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if fragment in cmdline and state not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def resources(pid: int) -> tuple[int, float]:
    """(open file descriptors, RSS in MB) of `pid`."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return fds, int(line.split()[1]) / 1024
    return fds, 0.0


def assern_pid(home: Path) -> int:
    [pid] = [
        p
        for p in pids_of("assern serve")
        if (Path(f"/proc/{p}/environ").read_bytes().find(str(home).encode()) >= 0)
    ]
    return pid


async def caller(client: Client, books: Books, index: int, stop: trio.Event, call_timeout: float) -> None:
    turn = index
    while not stop.is_set():
        backend = BACKENDS[turn % len(BACKENDS)]
        turn += 1
        call = Call(backend=backend, started=trio.current_time())
        books.calls.append(call)
        tool, arguments = (
            (f"{backend}_sleep", {"ms": 20}) if turn % 4 == 0 else (f"{backend}_echo", {"text": "x"})
        )
        with trio.move_on_after(call_timeout + 5) as waited:
            try:
                result = await client.call_tool(tool, arguments)
                call.ok = not result.is_error
            except MCPError:
                call.ok = False
        if waited.cancelled_caught:
            call.hung = True
            continue
        call.ended = trio.current_time()


async def killer(books: Books, every: float, stop: trio.Event) -> None:
    books.kills_started = trio.current_time()
    turn = 0
    while not stop.is_set():
        backend = BACKENDS[turn % len(BACKENDS)]
        turn += 1
        books.look()
        for pid in pids_of(f"--name {backend}"):
            os.kill(pid, signal.SIGKILL)
        books.kills.append((trio.current_time(), backend))
        with trio.move_on_after(every):
            await stop.wait()


async def reloader(pid: int, books: Books, every: float, stop: trio.Event) -> None:
    while not stop.is_set():
        with trio.move_on_after(every):
            await stop.wait()
        if not stop.is_set():
            os.kill(pid, signal.SIGHUP)
            books.reloads += 1


def _latencies(calls: list[Call]) -> dict[str, float | None]:
    times = sorted((c.ended - c.started) * 1000 for c in calls if c.ended is not None and c.ok)
    if not times:
        return {"median_ms": None, "p99_ms": None, "max_ms": None, "calls": 0}
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return {"median_ms": statistics.median(times), "p99_ms": p99, "max_ms": times[-1], "calls": len(times)}


def healthy(call: Call, kills: list[tuple[float, str]], settle: float) -> bool:
    """A call to a backend that was not killed while it ran (nor within `settle` s before)."""
    end = call.ended if call.ended is not None else call.started
    return not any(b == call.backend and call.started - settle <= t <= end for t, b in kills)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="assern-soak-"))
    home = work / "assern-home"
    config = work / "config.toml"
    write_config(config, args.timeout)
    assern = Path(sys.executable).with_name("assern")
    env = {**os.environ, "ASSERN_HOME": str(home), "ASSERN_NO_INSTANCE_SHARING": "1"}
    params = StdioServerParameters(
        command=str(assern), args=["serve", "--config", str(config)], env=env, cwd=str(work)
    )
    books = Books()
    wire = Wire(drop_answer=args.drop_answer)
    async with Client(tapped(params, wire), mode="legacy") as client:
        await client.list_tools()
        pid = assern_pid(home)
        books.look()
        start_fds, start_rss = resources(pid)
        stop, kills_on = trio.Event(), trio.Event()
        async with trio.open_nursery() as nursery:
            for index in range(args.concurrency):
                nursery.start_soon(caller, client, books, index, stop, args.timeout)
            await trio.sleep(args.warmup)
            nursery.start_soon(killer, books, args.kill_every, stop)
            nursery.start_soon(reloader, pid, books, args.reload_every, stop)
            kills_on.set()
            await trio.sleep(args.duration)
            stop.set()
            with trio.move_on_after(args.timeout + 10):  # the calls in flight finish
                while any(c.ended is None and not c.hung for c in books.calls):  # noqa: ASYNC110
                    await trio.sleep(0.1)  # polling the books: the calls end in their own tasks
            lost = wire.unanswered()
            nursery.cancel_scope.cancel()
        end_fds, end_rss = resources(pid)
        books.look()
    began = books.kills_started or 0.0
    warm = [c for c in books.calls if c.started < began]
    during = [c for c in books.calls if c.started >= began and healthy(c, books.kills, 1.0)]
    return {
        "duration_s": args.duration,
        "concurrency": args.concurrency,
        "calls": len(books.calls),
        "ok": sum(c.ok for c in books.calls),
        "errors": sum(1 for c in books.calls if c.ended is not None and not c.ok),
        "hung": sum(c.hung for c in books.calls),
        "lost": len(lost),
        "requests_written": len(wire.written),
        "answers_read": len(wire.answered),
        "answers_dropped": len(wire.dropped),
        "kills": len(books.kills),
        "reloads": books.reloads,
        "restarts": len(books.pids) - len(BACKENDS),
        "healthy_latency_warmup": _latencies(warm),
        "healthy_latency_during_kills": _latencies(during),
        "fds": {"start": start_fds, "end": end_fds},
        "rss_mb": {"start": round(start_rss, 1), "end": round(end_rss, 1)},
    }


def render(figures: dict[str, Any]) -> str:
    def lat(block: dict[str, Any]) -> str:
        if block["median_ms"] is None:
            return "no calls"
        return (
            f"median {block['median_ms']:.2f} ms, p99 {block['p99_ms']:.2f} ms, "
            f"max {block['max_ms']:.1f} ms ({block['calls']} calls)"
        )

    lines = [
        f"soak: {figures['duration_s']} s, {figures['concurrency']} calls in flight, "
        f"{len(BACKENDS)} backends",
        f"  calls           {figures['calls']}: {figures['ok']} ok, "
        f"{figures['errors']} answered with an error",
        f"  hung            {figures['hung']}",
        f"  lost            {figures['lost']} (at the wire: {figures['requests_written']} requests "
        f"written, {figures['answers_read']} answers read"
        + (f", {figures['answers_dropped']} dropped by the fault" if figures["answers_dropped"] else "")
        + ")",
        f"  kills, reloads  {figures['kills']} SIGKILLs, {figures['reloads']} SIGHUP reloads",
        f"  restarts        {figures['restarts']}",
        f"  healthy, warm   {lat(figures['healthy_latency_warmup'])}",
        f"  healthy, kills  {lat(figures['healthy_latency_during_kills'])}",
        f"  open fds        {figures['fds']['start']} -> {figures['fds']['end']}",
        f"  RSS             {figures['rss_mb']['start']} -> {figures['rss_mb']['end']} MB",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of kills and reloads (120)")
    parser.add_argument("--warmup", type=float, default=10.0, help="quiet seconds first (10)")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight (32)")
    parser.add_argument("--kill-every", type=float, default=5.0, help="seconds between SIGKILLs (5)")
    parser.add_argument("--reload-every", type=float, default=20.0, help="seconds between reloads (20)")
    parser.add_argument("--timeout", type=float, default=10.0, help="the backends' call timeout (10)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--drop-one-answer",
        dest="drop_answer",
        action="store_const",
        const=DROPPED_ANSWER,
        help=f"the fault: drop the {DROPPED_ANSWER}th tools/call answer before the client sees it "
        "(the run must then report 1 lost)",
    )
    args = parser.parse_args(argv)
    figures = trio.run(soak, args)
    print(render(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
