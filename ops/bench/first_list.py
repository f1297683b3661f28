"""How long a client waits for its first `tools/list`, with and without saved lists.

    .venv/bin/python ops/bench/first_list.py              # 8 starts of each kind, in turn
    .venv/bin/python ops/bench/first_list.py --starts 3 --json first_list.json

Each start spawns `assern serve` on the bundled default configuration (three real stdio
backends: the notes and calculator examples and the reference `mcp-server-time`) in a
private ASSERN_HOME, as an isolated instance (`ASSERN_NO_INSTANCE_SHARING=1`), sends
`initialize`, `notifications/initialized` and `tools/list`, and times from the spawn to
the list's answer; it also counts the tools in that answer and the `list_changed`
notifications received before it. Kinds, taking turns so the machine's drift hits them
alike:

- "cold": the saved lists are removed before the start (a first start ever, or after an
  upgrade): the list waits for the backends to start;
- "warm": the saved lists of the previous start are kept: the list is answered from
  them while the backends start;
- "daemon": a workstation daemon runs (started once, before the first start of this
  kind, in an ASSERN_HOME of its own): `assern serve` joins it, and its view of the
  configuration is running or starts for the client (`--daemon` adds this kind);
- "started": no daemon runs, the saved lists are kept: `assern serve` starts the daemon
  (in an ASSERN_HOME of its own) and, meanwhile, answers `initialize` and `tools/list`
  from the session the previous start kept (app/first_answers.py), then joins it, as a
  client does with no service installed; `assernctl shutdown` stops it after each start,
  untimed (`--daemon` adds this kind too).

After the list, each start calls one tool (`time_get_current_time`) and times its answer
too: the list may come from what was kept, a call needs its backend running.

Each start ends when its client closes stdin and the process has exited (that wait is
timed too: an isolated instance stops its backends first; a start that joined the daemon
is only its bridge). Prints the median and the slowest of each kind, and their ratio.
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

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parents[1] / "examples" / "default.toml"


def assern() -> str:
    found = shutil.which("assern", path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit("the `assern` console script is not installed beside this Python")
    return found


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def environ(home: Path, *, isolated: bool) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "ASSERN_HOME": str(home / "assern"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    if isolated:
        env["ASSERN_NO_INSTANCE_SHARING"] = "1"
    return env


def one_start(home: Path, work: Path, *, isolated: bool = True) -> dict[str, Any]:
    """Spawn, handshake, list; the seconds to the list's answer and what came before it."""
    env = environ(home, isolated=isolated)
    started = time.perf_counter()
    process = subprocess.Popen(
        [assern(), "serve", "--config", str(CONFIG)],
        env=env,
        cwd=work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "first-list-bench", "version": "1"},
    }
    process.stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
    process.stdin.write(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    process.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    process.stdin.flush()
    changed = 0
    while True:
        raw = process.stdout.readline()
        if not raw:
            raise RuntimeError("assern ended before answering tools/list")
        message = json.loads(raw)
        if message.get("method", "").endswith("/list_changed"):
            changed += 1
        if message.get("id") == 2:
            seconds = time.perf_counter() - started
            tools = len(message["result"]["tools"])
            break
    call = {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}
    process.stdin.write(line({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
    process.stdin.flush()
    while json.loads(process.stdout.readline() or b'{"id": 3}').get("id") != 3:
        pass
    call_seconds = time.perf_counter() - started
    closed = time.perf_counter()
    process.stdin.close()
    process.wait(timeout=30)
    exit_seconds = time.perf_counter() - closed
    return {
        "seconds": seconds,
        "call_seconds": call_seconds,
        "tools": tools,
        "list_changed_before": changed,
        "exit_seconds": exit_seconds,
    }


def stop_daemon(home: Path) -> None:
    """`assernctl shutdown` of the daemon a start left running (it waits for its exit)."""
    assernctl = shutil.which("assernctl", path=str(Path(sys.executable).parent))
    assert assernctl is not None
    subprocess.run(
        [assernctl, "shutdown"], env=environ(home, isolated=False), cwd=home, capture_output=True, check=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=8, help="starts of each kind (8)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--daemon", action="store_true", help="also time starts that join a running daemon")
    args = parser.parse_args()
    kinds = ("cold", "warm", "daemon", "started") if args.daemon else ("cold", "warm")
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="assern-first-list-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir(parents=True)
        saved = home / "assern" / "cache" / "catalogs"
        daemon_home = Path(tmp) / "daemon-home"
        daemon = None
        if args.daemon:
            daemon = subprocess.Popen(
                [assern(), "daemon"],
                env=environ(daemon_home, isolated=False),
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            assert daemon.stderr is not None
            daemon.stderr.readline()  # it listens
            one_start(daemon_home, work, isolated=False)  # its view starts, its lists are saved
        started_home = Path(tmp) / "started-home"
        if args.daemon:
            one_start(started_home, work, isolated=False)  # starts a daemon; its lists are saved
            stop_daemon(started_home)
        one_start(home, work)  # a warm-up, which also saves the lists
        try:
            for _ in range(args.starts):
                for kind in kinds:
                    if kind == "cold":
                        shutil.rmtree(saved, ignore_errors=True)
                    if kind == "daemon":
                        runs[kind].append(one_start(daemon_home, work, isolated=False))
                    elif kind == "started":
                        runs[kind].append(one_start(started_home, work, isolated=False))
                        stop_daemon(started_home)
                    else:
                        runs[kind].append(one_start(home, work))
        finally:
            if daemon is not None:
                daemon.terminate()
                daemon.wait(timeout=30)
    report: dict[str, Any] = {}
    for kind, found in runs.items():
        seconds = sorted(r["seconds"] for r in found)
        report[kind] = {
            "exit_median_ms": round(statistics.median(r["exit_seconds"] for r in found) * 1000, 1),
            "call_median_ms": round(statistics.median(r["call_seconds"] for r in found) * 1000, 1),
            "median_ms": round(statistics.median(seconds) * 1000, 1),
            "max_ms": round(seconds[-1] * 1000, 1),
            "tools": sorted({r["tools"] for r in found}),
            "list_changed_before": sum(r["list_changed_before"] for r in found),
        }
        print(
            f"{kind}: spawn to the first tools/list answer, median {report[kind]['median_ms']} ms, "
            f"slowest {report[kind]['max_ms']} ms over {len(found)} starts; tools listed "
            f"{report[kind]['tools']}; list_changed before it: {report[kind]['list_changed_before']}; "
            f"spawn to the answer of a tools/call sent after it, median {report[kind]['call_median_ms']} ms; "
            f"from its stdin closed to its exit, median {report[kind]['exit_median_ms']} ms"
        )
    ratio = report["warm"]["median_ms"] / report["cold"]["median_ms"]
    report["warm_over_cold"] = round(ratio, 3)
    print(f"warm / cold (medians): {ratio:.3f}")
    for kind in ("daemon", "started"):
        if kind in report:
            joined = report[kind]["median_ms"] / report["cold"]["median_ms"]
            report[f"{kind}_over_cold"] = round(joined, 3)
            print(f"{kind} / cold (medians): {joined:.3f}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
