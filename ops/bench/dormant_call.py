"""A dormant backend's first call, next to that backend's own start, in the same run.

    .venv/bin/python ops/bench/dormant_call.py                       # the daemon, 8 rounds
    .venv/bin/python ops/bench/dormant_call.py --mode instance --rounds 4 --json dormant.json

The world: a private HOME and ASSERN_HOME whose global config has one stdio server,
`bench` (ops/bench/bench_server.py: the SDK's low-level server), and `[settings]
idle_timeout` (1 s by default). One client, the official `mcp` client, starts `assern
serve` in a work folder and stays connected: with `--mode daemon` (the default) it joins
an `assern daemon` started first; with `--mode instance` it runs an isolated instance
(`ASSERN_NO_INSTANCE_SHARING=1`). Each round:

1. waits until the backend went dormant (its `backend_sleep` line in the log, and its
   process gone);
2. times the first `tools/call` of `bench_echo` through assern, which starts the
   dormant backend and waits for it ("dormant first call");
3. times 5 calls more, the backend now running ("warm call", their median);
4. times the backend's own start: its command spawned directly with the official
   client, from the spawn to the answer to `initialize` ("own start"), and on to the
   answer to one `tools/call` of `echo` ("own start and call"). Odd rounds do this
   first, before 2, so the machine's drift hits both alike.

Prints the median of each over the rounds, the median of assern's own timing of each
wake's start (`backend_ready`'s `duration_ms`: from its spawn to its listing), and the
medians of the per-round differences `dormant first call - own start` and `dormant
first call - own start and call`, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
BENCH_SERVER = HERE / "bench_server.py"
SERVER = "bench"
WARM_CALLS = 5
#: what each round times, and how the output names it
LABELS = {
    "own_start": "own start (spawn to the answer to initialize, the official client)",
    "own_start_and_call": "own start and call (spawn to the answer to its first tools/call)",
    "dormant_first_call": "dormant first call (tools/call through assern that starts the backend)",
    "warm_call": f"warm call (tools/call through assern to the running backend, median of {WARM_CALLS})",
}
#: what the log tells of each round (assern's `backend_ready`: from its spawn to its listing)
LOGGED = {"assern_start": "the backend's start as assern timed it (backend_ready: spawn to listed)"}


def assern() -> str:
    found = shutil.which("assern", path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit("the `assern` console script is not installed beside this Python")
    return found


def config(idle_timeout: float) -> str:
    return (
        f"[settings]\nidle_timeout = {idle_timeout}\n\n"
        f"[servers.{SERVER}]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(BENCH_SERVER))}, "--name", "dormant-bench"]\n'
    )


def environ(home: Path, *, isolated: bool) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "ASSERN_HOME": str(home / "assern"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    if isolated:
        env["ASSERN_NO_INSTANCE_SHARING"] = "1"
    return env


def log_events(log: Path, name: str) -> list[dict[str, Any]]:
    """The log's events called `name` for the bench server."""
    found = []
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == name and event.get("server") == SERVER:
            found.append(event)
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def dormant(log: Path, sleeps: int) -> None:
    """Wait for the backend's sleep number `sleeps` and for its process to be gone."""
    with trio.fail_after(120):
        while len(log_events(log, "backend_sleep")) < sleeps:  # noqa: ASYNC110 - another process's log
            await trio.sleep(0.05)
        ready = log_events(log, "backend_ready")
        pid = ready[-1].get("pid") if ready else None
        while isinstance(pid, int) and alive(pid):  # noqa: ASYNC110 - another process
            await trio.sleep(0.02)


async def own_start(params: StdioServerParameters) -> tuple[float, float]:
    """Seconds from spawning the backend to its answer to initialize, and to its first call's."""
    started = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        initialized = time.perf_counter() - started
        await client.call_tool("echo", {"text": "own"})
        called = time.perf_counter() - started
    return initialized, called


async def timed_call(client: Client, text: str) -> float:
    started = time.perf_counter()
    result = await client.call_tool(f"{SERVER}_echo", {"text": text})
    seconds = time.perf_counter() - started
    if result.is_error:
        raise RuntimeError(f"the call through assern failed: {result.content}")
    return seconds


async def measure(home: Path, work: Path, env: dict[str, str], rounds: int) -> dict[str, list[float]]:
    """The rounds (see the module), with a client of `assern serve` in `work`."""
    runs: dict[str, list[float]] = {key: [] for key in LABELS}
    log = home / "assern" / "logs" / "assern.log"
    serve = StdioServerParameters(command=assern(), args=["serve"], env=env, cwd=str(work))
    own = StdioServerParameters(
        command=sys.executable, args=[str(BENCH_SERVER), "--name", "own-bench"], env=env, cwd=str(work)
    )
    async with Client(serve, mode="legacy") as client:
        await timed_call(client, "warm-up")  # the backend started once and ran
        for number in range(1, rounds + 1):
            await dormant(log, number)
            own_first = number % 2 == 1  # the two take turns going first
            if own_first:
                initialized, called = await own_start(own)
            if len(log_events(log, "backend_lazy_start")) >= number:
                raise RuntimeError("the backend woke before the timed call")
            runs["dormant_first_call"].append(await timed_call(client, f"dormant {number}"))
            warm = [await timed_call(client, f"warm {number}.{i}") for i in range(WARM_CALLS)]
            runs["warm_call"].append(statistics.median(warm))
            if not own_first:
                initialized, called = await own_start(own)
            runs["own_start"].append(initialized)
            runs["own_start_and_call"].append(called)
    # assern's own measure of each wake's start (spawn to listed), the warm-up's left out
    starts = [event["duration_ms"] / 1000 for event in log_events(log, "backend_ready")[1:]]
    runs["assern_start"] = starts[:rounds]
    return runs


def run(mode: str, rounds: int, idle_timeout: float) -> dict[str, list[float]]:
    """Set up the world, start the daemon (`--mode daemon`), measure, stop."""
    with tempfile.TemporaryDirectory(prefix="assern-dormant-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        (home / "assern").mkdir(parents=True)
        work.mkdir()
        (home / "assern" / "config.toml").write_text(config(idle_timeout))
        env = environ(home, isolated=mode == "instance")
        daemon = None
        if mode == "daemon":
            daemon = subprocess.Popen(
                [assern(), "daemon"], env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            assert daemon.stderr is not None
            daemon.stderr.readline()  # it listens
        try:
            return trio.run(measure, home, work, env, rounds)
        finally:
            if daemon is not None:
                daemon.terminate()
                daemon.wait(timeout=30)
                if daemon.stderr is not None:
                    daemon.stderr.close()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mode", choices=("daemon", "instance"), default="daemon", help="daemon (default) or instance"
    )
    parser.add_argument("--rounds", type=int, default=8, help="rounds (8)")
    parser.add_argument(
        "--idle-timeout", type=float, default=1.0, help="the backend's idle_timeout, seconds (1)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    runs = run(args.mode, args.rounds, args.idle_timeout)
    load_after = os.getloadavg()
    report: dict[str, Any] = {
        "mode": args.mode,
        "rounds": args.rounds,
        "idle_timeout_s": args.idle_timeout,
        "load_average": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
    }
    print(
        f"{args.mode}, idle_timeout {args.idle_timeout:g} s, {args.rounds} rounds; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    for key, label in LABELS.items():
        found = runs[key]
        figures = report[key] = {
            "median_ms": ms(statistics.median(found)),
            "min_ms": ms(min(found)),
            "max_ms": ms(max(found)),
        }
        print(f"{label}: median {figures['median_ms']} ms (min {figures['min_ms']}, max {figures['max_ms']})")
    for key, label in LOGGED.items():
        found = runs[key]
        if found:
            report[key] = {"median_ms": ms(statistics.median(found))}
            print(f"{label}: median {report[key]['median_ms']} ms")
    for own in ("own_start", "own_start_and_call"):
        differences = [d - o for d, o in zip(runs["dormant_first_call"], runs[own], strict=True)]
        key = f"dormant_first_call_minus_{own}"
        report[key] = {"median_ms": ms(statistics.median(differences))}
        print(
            f"dormant first call - {own.replace('_', ' ')}: median {report[key]['median_ms']} ms (per round)"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
