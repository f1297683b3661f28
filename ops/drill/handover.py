"""Drill: the workstation daemon killed, or superseded, under two busy clients.

    .venv/bin/python ops/drill/handover.py                       # both cases, 20 s each
    .venv/bin/python ops/drill/handover.py --case kill           # SIGKILL at 10 s
    .venv/bin/python ops/drill/handover.py --case supersede      # another build at 10 s
    .venv/bin/python ops/drill/handover.py --seconds 4 --json drill.json

By default both cases run, one after the other, each in a folder of its own. In each,
two clients of the official `mcp` SDK, one per protocol era (the 2025 handshake and the
stateless 2026-07-28), each start `assern serve` in one folder (the first starts the
daemon) and call a bench backend's `echo` every 20 ms for `--seconds`, counted from
both clients' first answered call (the backend's start left out). Half-way:

- `kill`: the daemon is killed with SIGKILL. Each client's `assern serve` resumes the
  session on a new daemon; the calls in flight at the kill get errors.
- `supersede`: a third client, of ANOTHER BUILD (a copy of this package with version
  9.9.9, on its PYTHONPATH), starts `assern serve` in the same folder. Its shim reads the
  running daemon's build in the welcome, starts a daemon of its own build that takes the
  sockets over, and joins it; the old daemon tells the two sessions to move, finishes
  their calls in flight and stops. Once the third client's session is open, all three
  call for half `--seconds` more (so the first two call a little longer than
  `--seconds`: the takeover's time more).

Printed per client: calls ok, failed (with an error), hung (no answer within `--hang`
seconds: there must be none), disconnects (the session ended under the client: none),
whether the session still answers afterwards, how long its first call took (it waits
for the backend's start), the slowest call after it that succeeded with when it was
sent, counted from the kill or the takeover, and the slowest that succeeded among the
calls sent after the kill or the takeover; the `session_resumed` lines of the log; and
whether any process of the old daemon's tree (itself, its watchdog and its backends)
is left once the new daemon serves. For `kill`: the old and new daemon's
pids. For `supersede`: the old daemon's pid and build, the calls in flight on it and
the sessions it told to move at the takeover (its `daemon_superseded` line), how long
after the takeover it was gone against its drain deadline plus 1 s, and the new
daemon's pid, build and generation with the clients it serves (its `assernctl status
--json`, asked while every client is still connected), and what it warmed before it took
the sockets (its `daemon_warmed` line: the moving sessions' views and their backends).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from procs import Ident, alive, descendants, ident, loadavg  # noqa: E402

ERAS = ("legacy", "2026-07-28")
CASES = ("kill", "supersede")
#: what the times of a case are counted from
DISRUPTION = {"kill": "kill", "supersede": "takeover"}
INTERVAL = 0.02
#: The version the other build claims (higher than any this package has: it supersedes).
NEWER_VERSION = "9.9.9"
#: How long past its drain deadline the drill waits for a superseded daemon to go.
GONE_WAIT = 5.0
#: The target: the old daemon gone within its drain deadline plus this.
GONE_TARGET = 1.0


def script(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit(f"the `{name}` console script is not installed beside this Python")
    return found


def world(root: Path) -> tuple[dict[str, str], Path]:
    home, assern_home, work = root / "home", root / "assern-home", root / "work"
    for folder in (home, assern_home, work):
        folder.mkdir(parents=True)
    args = json.dumps([str(BENCH / "bench_server.py"), "--name", "b01", "--tools", "3"])
    config = f"[servers.b01]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
    (assern_home / "config.toml").write_text(config)
    env = {
        "HOME": str(home),
        "ASSERN_HOME": str(assern_home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    return env, work


def other_build(root: Path) -> dict[str, str]:
    """A copy of the installed package claiming NEWER_VERSION under `root`: the environment
    (PYTHONPATH) with which a client runs `assern serve` of that other build."""
    try:
        import assern.actors.identity as installed
    except ImportError:
        sys.exit("the `assern` package is not installed for this Python")
    # The package's own folder, found from one of its modules: `assern` may be a namespace
    # package with more than one path (an editable install); its folders may be links,
    # which the copy follows.
    package = Path(installed.__file__).parent.parent
    target = root / "assern"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(package, target, ignore=skip)
    identity = target / "actors" / "identity.py"
    text = identity.read_text()
    changed = text.replace('__version__ = "', f'__version__ = "{NEWER_VERSION}"  # was "', 1)
    if changed == text:
        sys.exit(f"no `__version__` in {identity}: cannot make another build")
    identity.write_text(changed)
    return {"PYTHONPATH": str(root)}


def daemon_doc(env: dict[str, str], work: Path, tries: int = 3) -> dict[str, Any] | None:
    """`assernctl status --json`'s `workstation` part: the daemon and its sessions (asked
    again, at most `tries` times, while it names no daemon)."""
    for _ in range(tries):
        done = subprocess.run(
            [script("assernctl"), "status", "--json"], env=env, cwd=work, capture_output=True, check=False
        )
        try:
            found = json.loads(done.stdout)["workstation"]
        except (ValueError, KeyError, TypeError):
            found = None
        if isinstance(found, dict) and isinstance(found.get("daemon", {}).get("pid"), int):
            return found
        print(
            f"assernctl status named no daemon: {done.stderr.decode(errors='replace')[-500:]}",
            file=sys.stderr,
        )
        time.sleep(0.5)
    return None


def log_lines(env: dict[str, str]) -> list[dict[str, Any]]:
    log = Path(env["ASSERN_HOME"]) / "logs" / "assern.log"
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()]


def epoch(stamp: str) -> float:
    """A log line's `ts` (UTC, ISO 8601) as seconds since the epoch."""
    return datetime.datetime.fromisoformat(stamp).timestamp()


def new_counts() -> dict[str, Any]:
    return {
        "ok": 0,
        "failed": 0,
        "hung": 0,
        "disconnects": 0,
        "works_after": False,
        "first_ms": None,  # the first call (a backend that starts makes it slow)
        "slowest_ok_ms": 0.0,  # of the calls after the first
        "slowest_ok_at": None,  # when it was sent (seconds since the epoch)
        "oks": [],  # (sent at, ms) of every call that succeeded
        "errors": [],
        "ready": trio.Event(),
        "answered": trio.Event(),
        "finished": trio.Event(),
    }


async def client(
    name: str,
    era: str,
    params: StdioServerParameters,
    window: dict[str, float],
    hang: float,
    counts: dict[str, Any],
    release: trio.Event,
) -> None:
    """Call `b01_echo` every INTERVAL until `window["until"]` (trio's clock, read before
    each call), counting; then once more; then keep the session open until `release`."""
    try:
        async with Client(params, mode=era, client_info=Implementation(name=name, version="1")) as session:
            counts["ready"].set()
            while trio.current_time() < window["until"]:
                started, sent_at = trio.current_time(), time.time()
                with trio.move_on_after(hang) as waited:
                    try:
                        await session.call_tool("b01_echo", {"text": name})
                        counts["ok"] += 1
                        took = round((trio.current_time() - started) * 1000, 1)
                        counts["oks"].append((sent_at, took))
                        if counts["answered"].is_set() and took > counts["slowest_ok_ms"]:
                            counts["slowest_ok_ms"], counts["slowest_ok_at"] = took, sent_at
                    except MCPError as error:
                        counts["failed"] += 1
                        counts["errors"].append(str(error))
                if waited.cancelled_caught:
                    counts["hung"] += 1
                if not counts["answered"].is_set():  # its first call is done, whatever its outcome
                    counts["first_ms"] = round((trio.current_time() - started) * 1000, 1)
                    counts["answered"].set()
                await trio.sleep(INTERVAL)
            with trio.move_on_after(hang):
                answer = await session.call_tool("b01_echo", {"text": "after"})
                counts["works_after"] = not answer.is_error
            counts["finished"].set()
            await release.wait()
    except Exception as error:  # the session ended under the client
        counts["disconnects"] += 1
        counts["errors"].append(f"disconnect: {error!r}")
    finally:
        for event in ("ready", "answered", "finished"):
            counts[event].set()


async def start_clients(
    nursery: trio.Nursery,
    params: StdioServerParameters,
    window: dict[str, float],
    hang: float,
    counts: dict[str, dict[str, Any]],
    release: trio.Event,
) -> float:
    """Start a client per era, one after the other (the first starts the daemon); once
    each one's first call is done (the backend started), trio's clock."""
    for era in ERAS:
        nursery.start_soon(client, era, era, params, window, hang, counts[era], release)
        await counts[era]["ready"].wait()
    for era in ERAS:
        await counts[era]["answered"].wait()
    return trio.current_time()


async def shutdown(env: dict[str, str], work: Path) -> None:
    await trio.run_process(
        [script("assernctl"), "shutdown"],
        env=env,
        cwd=work,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def resumes(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: e.get(k) for k in ("why", "by", "resume_s", "requests_failed")}
        for e in lines
        if e.get("event") == "session_resumed"
    ]


async def wait_gone(tree: list[Ident], limit: float) -> int:
    """Wait (at most `limit` s) until no process of `tree` lives; how many still do."""
    with trio.move_on_after(limit):
        while any(alive(who) for who in tree):  # noqa: ASYNC110 - other processes
            await trio.sleep(0.01)
    return sum(1 for who in tree if alive(who))


def identities(pids: list[int]) -> list[Ident]:
    return [who for who in map(ident, pids) if who is not None]


async def kill_case(seconds: float, hang: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="assern-drill-") as tmp:
        env, work = world(Path(tmp))
        params = StdioServerParameters(command=script("assern"), args=["serve"], env=env, cwd=str(work))
        counts = {era: new_counts() for era in ERAS}
        release = trio.Event()
        figures: dict[str, Any] = {"case": "kill", "load_average": loadavg()}
        try:
            async with trio.open_nursery() as nursery:
                window = {"until": float("inf")}
                started = await start_clients(nursery, params, window, hang, counts, release)
                window["until"] = started + seconds
                found = await trio.to_thread.run_sync(daemon_doc, env, work)  # asked before: it is slow
                assert found is not None, "no daemon answered assernctl status"
                old = found["daemon"]["pid"]
                await trio.sleep_until(started + seconds / 2)
                tree = identities([old, *descendants(old)])
                os.kill(old, signal.SIGKILL)
                figures["disrupted_at"] = time.time()
                figures["killed_pid"] = old
                figures["old_tree"] = len(tree)
                for era in ERAS:
                    await counts[era]["finished"].wait()
                found = await trio.to_thread.run_sync(daemon_doc, env, work)
                figures["new_pid"] = found["daemon"]["pid"] if found else None
                release.set()
            figures["old_tree_left"] = await wait_gone(tree, 10)
            figures["resumes"] = resumes(log_lines(env))
        finally:
            await shutdown(env, work)
        figures["clients"] = {era: public(counts[era], figures.get("disrupted_at")) for era in ERAS}
        return figures


async def supersede_case(seconds: float, hang: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="assern-drill-") as tmp:
        env, work = world(Path(tmp))
        newer = other_build(Path(tmp) / "other-build")
        params = StdioServerParameters(command=script("assern"), args=["serve"], env=env, cwd=str(work))
        other = params.model_copy(update={"env": {**env, **newer}})
        names = (*ERAS, "other build")
        counts = {name: new_counts() for name in names}
        release = trio.Event()
        figures: dict[str, Any] = {"case": "supersede", "load_average": loadavg()}
        try:
            async with trio.open_nursery() as nursery:
                # calling until half `seconds` after the other build's client is in
                window = {"until": float("inf")}
                started = await start_clients(nursery, params, window, hang, counts, release)
                found = await trio.to_thread.run_sync(daemon_doc, env, work)  # asked before: it is slow
                assert found is not None, "no daemon answered assernctl status"
                old = found["daemon"]
                await trio.sleep_until(started + seconds / 2)
                daemon = ident(old["pid"])
                assert daemon is not None, f"the daemon {old['pid']} that status named is gone"
                tree = [daemon, *identities(descendants(old["pid"]))]
                figures["old"] = {"pid": old["pid"], "build": old["build"], "tree": len(tree)}
                gone_at: list[float] = []
                watching = trio.CancelScope()
                nursery.start_soon(watch_gone, daemon, gone_at, watching)
                nursery.start_soon(client, names[2], "legacy", other, window, hang, counts[names[2]], release)
                await counts[names[2]]["ready"].wait()
                window["until"] = trio.current_time() + seconds / 2
                for name in names:
                    await counts[name]["finished"].wait()
                new = await trio.to_thread.run_sync(daemon_doc, env, work)
                release.set()
                told = next((e for e in log_lines(env) if e.get("event") == "daemon_superseded"), None)
                # the old daemon has its drain deadline (plus GONE_WAIT) to go
                left = epoch(told["ts"]) + told["drain_deadline_s"] - time.time() if told else 0.0
                watching.deadline = trio.current_time() + max(0.0, left) + GONE_WAIT
            figures["takeover"] = takeover(told, gone_at)
            figures["disrupted_at"] = epoch(told["ts"]) if told else None
            figures["old_tree_left"] = await wait_gone(tree, 10)
            figures["new"] = new_daemon(new, old["pid"])
            figures["resumes"] = resumes(log_lines(env))
            figures["warmed"] = warmed(log_lines(env))
        finally:
            await shutdown({**env, **newer}, work)
        figures["clients"] = {name: public(counts[name], figures.get("disrupted_at")) for name in names}
        return figures


async def watch_gone(who: Ident, gone_at: list[float], scope: trio.CancelScope) -> None:
    """Note the wall-clock time at which `who` stops living (polled every 10 ms), until
    `scope` is cancelled."""
    with scope:
        while alive(who):  # noqa: ASYNC110 - another process
            await trio.sleep(0.01)
        gone_at.append(time.time())


def takeover(told: dict[str, Any] | None, gone_at: list[float]) -> dict[str, Any]:
    """When the old daemon was told it was superseded, its drain deadline, and how long
    after it was gone."""
    if told is None:
        return {"told": False, "gone": bool(gone_at), "gone_after_s": None, "drain_deadline_s": None}
    deadline = float(told["drain_deadline_s"])
    after = round(gone_at[0] - epoch(told["ts"]), 3) if gone_at else None
    return {
        "told": True,
        "by": told.get("by"),
        "sessions_told": told.get("sessions_told"),
        "calls_in_flight": told.get("calls_in_flight"),
        "drain_deadline_s": deadline,
        "gone": after is not None,
        "gone_after_s": after,
        "within_target": after is not None and after <= deadline + GONE_TARGET,
    }


def new_daemon(found: dict[str, Any] | None, old_pid: int) -> dict[str, Any]:
    """The daemon serving once every client finished, and the clients it serves."""
    if found is None:
        return {"pid": None, "build": None, "generation": None, "predecessor_pid": None, "clients": []}
    daemon = found["daemon"]
    return {
        "pid": daemon["pid"],
        "build": daemon["build"],
        "generation": daemon.get("generation"),
        "predecessor_pid": (daemon.get("predecessor") or {}).get("pid"),
        "is_new": daemon["pid"] != old_pid,
        "clients": sorted(str(s.get("client")) for s in found.get("sessions") or ()),
    }


def public(counts: dict[str, Any], at: float | None) -> dict[str, Any]:
    """A client's counts for the report, with the slowest call that succeeded among those
    sent at or after the disruption (`at`, seconds since the epoch)."""
    after = [took for sent, took in counts["oks"] if at is not None and sent >= at]
    found = {k: v for k, v in counts.items() if not isinstance(v, trio.Event) and k != "oks"}
    return {**found, "calls_after": len(after), "slowest_after_ms": max(after, default=None)}


def warmed(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the new daemon warmed before it took the sockets (its `daemon_warmed` line)."""
    line = next((e for e in lines if e.get("event") == "daemon_warmed"), None)
    if line is None:
        return None
    return {key: line.get(key) for key in ("views", "sessions", "backends", "skipped", "warm_s")}


def print_clients(figures: dict[str, Any]) -> None:
    at = figures.get("disrupted_at")
    for name, c in figures["clients"].items():
        sent = c["slowest_ok_at"]
        when = f" (sent {sent - at:+.2f} s from the {DISRUPTION[figures['case']]})" if sent and at else ""
        print(
            f"{name:11} ok {c['ok']:5}  failed {c['failed']}  hung {c['hung']}  "
            f"disconnects {c['disconnects']}  works afterwards {c['works_after']}  "
            f"first call {c['first_ms']} ms  slowest ok call after it {c['slowest_ok_ms']} ms{when}  "
            f"slowest ok call sent after the {DISRUPTION[figures['case']]} {c['slowest_after_ms']} ms "
            f"({c['calls_after']} calls)"
        )
    for resumed in figures["resumes"]:
        by = f" by {resumed['by']}" if resumed.get("by") else ""
        print(
            f"session_resumed: {resumed['why']}{by} in {resumed['resume_s']} s, "
            f"{resumed['requests_failed']} failed"
        )


def report(case: str, figures: dict[str, Any]) -> None:
    print(f"== {case} (load average {figures['load_average']})")
    print_clients(figures)
    if case == "kill":
        print(
            f"daemon {figures['killed_pid']} killed (its tree: {figures['old_tree']} processes, "
            f"{figures['old_tree_left']} left); new daemon {figures['new_pid']}"
        )
        return
    old, took, new = figures["old"], figures["takeover"], figures["new"]
    print(
        f"old daemon {old['pid']} ({old['build']}) told at the takeover with {took.get('calls_in_flight')} "
        f"calls in flight and {took.get('sessions_told')} sessions to move; gone {took['gone_after_s']} s "
        "after the takeover, "
        f"target within its drain deadline {took['drain_deadline_s']} s + {GONE_TARGET:g} s: "
        f"{'met' if took.get('within_target') else 'MISSED'} (its tree: {old['tree']} processes, "
        f"{figures['old_tree_left']} left)"
    )
    print(
        f"new daemon {new['pid']} ({new['build']}, generation {new['generation']}) serves: "
        f"{', '.join(new['clients'])}"
    )
    warm = figures.get("warmed")
    if warm is None:
        print("new daemon warmed nothing before it took the sockets (no daemon_warmed line)")
    else:
        print(
            f"new daemon warmed {warm['sessions']} sessions' views ({warm['views']} views, "
            f"{warm['backends']} backends ready, {warm['skipped']} skipped) in {warm['warm_s']} s "
            "before it took the sockets"
        )


async def drill(cases: list[str], seconds: float, hang: float) -> dict[str, Any]:
    run = {"kill": kill_case, "supersede": supersede_case}
    return {case: await run[case](seconds, hang) for case in cases}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=[*CASES, "both"], default="both", help="which drill (both)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each client calls (20)")
    parser.add_argument("--hang", type=float, default=10.0, help="seconds after which a call counts as hung")
    parser.add_argument("--json", type=Path, help="also write the figures here, by case")
    args = parser.parse_args()
    cases = list(CASES) if args.case == "both" else [args.case]
    figures = trio.run(drill, cases, args.seconds, args.hang)
    for case in cases:
        report(case, figures[case])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
