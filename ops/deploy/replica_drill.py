"""Replica drill: assern replicas behind HAProxy lose one replica under load.

    python ops/deploy/replica_drill.py                       # 3 replicas, 32 clients, 9 s
    python ops/deploy/replica_drill.py --seconds 20 --json out.json

Starts N `assern serve --http 127.0.0.1:PORT --no-stdio` replicas on one configuration
(the bundled calculator as the backend), HAProxy with ops/deploy/haproxy/haproxy.cfg
exactly as shipped (addresses through its environment variables), and drives clients
of both eras through the balancer with the official `mcp` client: half open a
handshake-era session each, half send stateless 2026-07-28 requests. A third of the
way in it kills (SIGKILL) the replica that holds the first session, and it watches
the balancer's stats until that replica is marked down.

It prints calls and errors per era, what happened to the sessions of the killed
replica and of the others, and how long the balancer took to drop the dead replica.
Exit status 0 when the promises hold: sessions on surviving replicas see no error,
every session of the killed replica gets an error and then a fresh session works,
stateless clients see no error at all. Needs `haproxy` on PATH (Debian: `apt-get
install haproxy`).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from assern_http import free_port, http_front, running  # noqa: E402

HAPROXY_CFG = HERE / "haproxy" / "haproxy.cfg"
CALL_LIMIT = 10.0  # seconds a single call may take before it counts as an error


@attrs.define
class Replica:
    name: str
    address: str  # HOST:PORT
    process: subprocess.Popen[bytes]


@attrs.define
class Session:
    """One handshake-era client's story."""

    replica: str = ""
    calls: int = 0
    errors: list[str] = attrs.Factory(list)
    error_after_kill: bool = False
    fresh_session_worked: bool = False


@attrs.define
class Drill:
    lb_url: str
    stats_url: str
    replicas: list[Replica]
    sessions: list[Session] = attrs.Factory(list)
    stateless_clients: int = 0
    stateless_calls: int = 0
    stateless_errors: list[str] = attrs.Factory(list)
    #: stateless answers the kill cut off mid-write (the head arrived, the body never did)
    stateless_cut: list[str] = attrs.Factory(list)
    killed: str = ""
    killed_at: float | None = None
    dropped_after: float | None = None


def replica_states(stats_url: str) -> dict[str, str]:
    """Each replica's status in the balancer's stats (UP, DOWN, …)."""
    with urllib.request.urlopen(stats_url + ";csv", timeout=5) as answer:
        rows = csv.DictReader(io.StringIO(answer.read().decode().lstrip("# ")))
        return {row["svname"]: row["status"] for row in rows if row["pxname"] == "assern"}


async def owner_of(session_id: str, replicas: list[Replica]) -> str:
    """The replica that knows `session_id`: the others answer 404."""
    ping = {"jsonrpc": "2.0", "id": "owner", "method": "ping"}
    headers = {
        "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-11-25",
        "accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(timeout=5) as http:
        for replica in replicas:
            answer = await http.post(f"http://{replica.address}/mcp", json=ping, headers=headers)
            if answer.status_code == 200:
                return replica.name
    return "?"


@asynccontextmanager
async def handshake_client(url: str) -> AsyncIterator[tuple[Client, list[str]]]:
    """A handshake-era client through the balancer, and the session ids it was given."""
    seen: list[str] = []

    async def remember(response: httpx2.Response) -> None:
        if (sid := response.headers.get("mcp-session-id")) and sid not in seen:
            seen.append(sid)

    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(timeout=timeout, event_hooks={"response": [remember]}) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client, seen


async def add(client: Client, a: int, b: int) -> None:
    with trio.fail_after(CALL_LIMIT):
        result = await client.call_tool("calc_add", {"a": a, "b": b})
    text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
    if result.is_error or float(text) != a + b:
        raise RuntimeError(f"wrong answer {text!r}")


def describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return describe(error.exceptions[0])
    return f"{type(error).__name__}: {str(error)[:120]}"


async def run_session(drill: Drill, record: Session, stop: trio.Event, first_open: trio.Event) -> None:
    """Call until `stop`; after an error, open a fresh session and go on with it."""
    n = 0
    fresh = False
    while not stop.is_set():
        try:
            async with handshake_client(drill.lb_url) as (client, seen):
                if not record.replica:
                    record.replica = await owner_of(seen[0], drill.replicas) if seen else "?"
                    first_open.set()
                while not stop.is_set():
                    n += 1
                    await add(client, n, 1)
                    record.calls += 1
                    if fresh:
                        record.fresh_session_worked = True
        except Exception as error:
            record.errors.append(describe(error))
            record.error_after_kill = record.error_after_kill or drill.killed_at is not None
            fresh = True
            await trio.sleep(0.05)


async def run_stateless(drill: Drill, stop: trio.Event) -> None:
    n = 0
    while not stop.is_set():
        try:
            async with Client(drill.lb_url, mode="2026-07-28") as client:
                while not stop.is_set():
                    n += 1
                    await add(client, n, 2)
                    drill.stateless_calls += 1
        except Exception as error:
            text = describe(error)
            if cut_by_the_kill(drill, text):
                drill.stateless_cut.append(text)
            else:
                drill.stateless_errors.append(text)


def cut_by_the_kill(drill: Drill, error: str) -> bool:
    """Whether `error` is an answer the kill cut off: its head was written, its body
    not, within moments of the SIGKILL. No balancer can resend a request whose answer
    has begun (docs/limits.md); any other stateless error breaks the promise."""
    if drill.killed_at is None or time.monotonic() - drill.killed_at > 1.0:
        return False
    return "peer closed connection without sending complete message body" in error


async def kill_and_watch(drill: Drill, victim: Replica) -> None:
    drill.killed = victim.name
    victim.process.send_signal(signal.SIGKILL)
    drill.killed_at = time.monotonic()
    with trio.move_on_after(30):
        # Polling on purpose: the balancer's stats page is the only signal it gives.
        while True:
            states = await trio.to_thread.run_sync(replica_states, drill.stats_url)
            if states.get(victim.name, "").startswith("DOWN"):
                break
            await trio.sleep(0.02)
        drill.dropped_after = time.monotonic() - drill.killed_at


async def drive(drill: Drill, clients: int, seconds: float) -> None:
    stop = trio.Event()
    first_open = trio.Event()
    drill.sessions = [Session() for _ in range(clients // 2)]
    drill.stateless_clients = clients - clients // 2
    async with trio.open_nursery() as nursery:
        for record in drill.sessions:
            nursery.start_soon(run_session, drill, record, stop, first_open)
        for _ in range(drill.stateless_clients):
            nursery.start_soon(run_stateless, drill, stop)
        with trio.fail_after(60):
            await first_open.wait()
        await trio.sleep(seconds / 3)
        victim = next(r for r in drill.replicas if r.name == drill.sessions[0].replica)
        await kill_and_watch(drill, victim)
        await trio.sleep(max(0.0, seconds * 2 / 3 - (drill.dropped_after or 0)))
        stop.set()


def wait_until(check: Any, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def verdict(drill: Drill) -> list[str]:
    """The promises that did not hold (empty: all held)."""
    broken = []
    survivors = [s for s in drill.sessions if s.replica != drill.killed]
    victims = [s for s in drill.sessions if s.replica == drill.killed]
    if any(s.errors for s in survivors):
        broken.append("a session on a surviving replica saw an error")
    if not victims:
        broken.append("no session was on the killed replica")
    if any(not s.error_after_kill for s in victims):
        broken.append("a session of the killed replica saw no error")
    if any(not s.fresh_session_worked for s in victims):
        broken.append("a client of the killed replica could not work in a fresh session")
    if drill.stateless_errors:
        broken.append("a stateless client saw an error")
    if drill.dropped_after is None:
        broken.append("the balancer never marked the killed replica down")
    return broken


def figures(drill: Drill, seconds: float) -> dict[str, Any]:
    victims = [s for s in drill.sessions if s.replica == drill.killed]
    survivors = [s for s in drill.sessions if s.replica != drill.killed]
    handshake_calls = sum(s.calls for s in drill.sessions)
    return {
        "replicas": len(drill.replicas),
        "seconds": seconds,
        "killed": drill.killed,
        "dropped_after_ms": None if drill.dropped_after is None else round(drill.dropped_after * 1000),
        "handshake": {
            "sessions": len(drill.sessions),
            "calls": handshake_calls,
            "sessions_on_killed": len(victims),
            "errors_on_killed": sum(len(s.errors) for s in victims),
            "fresh_sessions_working": sum(s.fresh_session_worked for s in victims),
            "sessions_on_survivors": len(survivors),
            "errors_on_survivors": sum(len(s.errors) for s in survivors),
            "error_kinds": sorted({e.split(":")[0] for s in drill.sessions for e in s.errors}),
            "errors_on_survivors_seen": sorted({e for s in survivors for e in s.errors}),
        },
        "stateless": {
            "clients": drill.stateless_clients,
            "calls": drill.stateless_calls,
            "errors": len(drill.stateless_errors),
            "error_kinds": sorted(set(drill.stateless_errors)),
            "cut_by_the_kill": len(drill.stateless_cut),
        },
        "calls_per_second": round((handshake_calls + drill.stateless_calls) / seconds),
        "broken": verdict(drill),
    }


def report(result: dict[str, Any]) -> None:
    hs, sl = result["handshake"], result["stateless"]
    print(
        f"{result['replicas']} replicas behind HAProxy, {hs['sessions'] + sl['clients']} clients,"
        f" {result['seconds']} s"
    )
    print(f"killed {result['killed']}; the balancer marked it down after {result['dropped_after_ms']} ms")
    print(
        f"handshake era: {hs['calls']} calls; {hs['sessions_on_killed']} sessions on the killed replica "
        f"({hs['errors_on_killed']} errors, {hs['fresh_sessions_working']} working again in a fresh "
        f"session); {hs['sessions_on_survivors']} on the others ({hs['errors_on_survivors']} errors)"
    )
    if hs["error_kinds"]:
        print(f"  errors seen: {', '.join(hs['error_kinds'])}")
    print(
        f"stateless (2026-07-28): {sl['calls']} calls, {sl['errors']} errors"
        f" (besides {sl['cut_by_the_kill']} answers the SIGKILL cut off mid-write)"
    )
    if sl["error_kinds"]:
        print(f"  errors seen: {', '.join(sl['error_kinds'])}")
    print(f"in all {result['calls_per_second']} calls/s through the balancer")
    for broken in result["broken"]:
        print(f"BROKEN: {broken}")
    if not result["broken"]:
        print("every promise held")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--clients", type=int, default=32, help="half handshake-era, half stateless")
    parser.add_argument("--seconds", type=float, default=9.0, help="the load's length; the kill is at 1/3")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", type=Path, help="keep the replicas' and the balancer's logs here")
    args = parser.parse_args()
    # A killed replica's clients end sessions the survivors never knew: the SDK warns
    # "Session termination failed: 404" for each, which is the expected answer.
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.ERROR)
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise SystemExit("haproxy is not installed (Debian: apt-get install haproxy)")
    with tempfile.TemporaryDirectory(prefix="assern-replicas-") as folder:
        work = args.keep or Path(folder)
        work.mkdir(parents=True, exist_ok=True)
        config = work / "config.toml"
        config.write_text(
            f"[servers.calc]\ncommand = {json.dumps(sys.executable)}\n"
            'args = ["-m", "assern.examples.calc_server"]\n'
        )
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        lb_port, stats_port = free_port(), free_port()
        with ExitStack() as stack:
            replicas = []
            for i in range(1, args.replicas + 1):
                home = {**env, "ASSERN_HOME": str(work / f"assern{i}")}
                process, url = stack.enter_context(http_front(config, home, work / f"assern{i}.log"))
                replicas.append(Replica(f"assern{i}", urlsplit(url).netloc, process))
            lb_env = {
                **env,
                "ASSERN_LB_BIND": f"127.0.0.1:{lb_port}",
                "ASSERN_LB_STATS": f"127.0.0.1:{stats_port}",
            }
            lb_env |= {f"ASSERN_REPLICA_{i}": r.address for i, r in enumerate(replicas, 1)}
            stack.enter_context(
                running([haproxy, "-db", "-f", str(HAPROXY_CFG)], lb_env, work / "haproxy.log")
            )
            drill = Drill(f"http://127.0.0.1:{lb_port}/mcp", f"http://127.0.0.1:{stats_port}/stats", replicas)
            wait_until(
                lambda: all(s == "UP" for s in replica_states(drill.stats_url).values()),
                "the balancer to see every replica up",
            )
            trio.run(drive, drill, args.clients, args.seconds)
    result = figures(drill, args.seconds)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 1 if result["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
