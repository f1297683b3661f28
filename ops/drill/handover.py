"""Drill: the workstation daemon killed with SIGKILL under two busy clients.

    .venv/bin/python ops/drill/handover.py                 # 20 s, the kill at 10 s
    .venv/bin/python ops/drill/handover.py --seconds 4 --json drill.json

Two clients of the official `mcp` SDK, one per protocol era (the 2025 handshake and
the stateless 2026-07-28), each start `assern serve` in one folder (the first starts
the daemon) and call a bench backend's `echo` every 20 ms. Half-way the daemon is
killed with SIGKILL. Each client's `assern serve` resumes the session on a new daemon.

Printed per client: calls ok, failed (with an error: those in flight at the kill),
hung (no answer within `--hang` seconds: there must be none), disconnects (the session
ended under the client: none), and whether the session still answers afterwards; the
old daemon's pid and the new one's; and whether any process of the old daemon's tree
(its backends) is left once the new daemon serves.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from procs import descendants  # noqa: E402

ERAS = ("legacy", "2026-07-28")
INTERVAL = 0.02


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


def daemon_pid(env: dict[str, str], work: Path) -> int | None:
    done = subprocess.run(
        [script("assernctl"), "status", "--json"], env=env, cwd=work, capture_output=True, check=False
    )
    try:
        pid = json.loads(done.stdout)["workstation"]["daemon"]["pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def client(
    era: str, params: StdioServerParameters, seconds: float, hang: float, counts: dict[str, Any]
) -> None:
    """Call `b01_echo` every INTERVAL for `seconds`, counting; then once more."""
    try:
        async with Client(params, mode=era) as session:
            counts["ready"].set()
            deadline = trio.current_time() + seconds
            while trio.current_time() < deadline:
                started = trio.current_time()
                with trio.move_on_after(hang) as waited:
                    try:
                        await session.call_tool("b01_echo", {"text": era})
                        counts["ok"] += 1
                        took = trio.current_time() - started
                        counts["slowest_ok_ms"] = max(counts["slowest_ok_ms"], round(took * 1000, 1))
                    except MCPError as error:
                        counts["failed"] += 1
                        counts["errors"].append(str(error))
                if waited.cancelled_caught:
                    counts["hung"] += 1
                await trio.sleep(INTERVAL)
            with trio.move_on_after(hang):
                answer = await session.call_tool("b01_echo", {"text": "after"})
                counts["works_after"] = not answer.is_error
    except Exception as error:  # the session ended under the client
        counts["disconnects"] += 1
        counts["errors"].append(f"disconnect: {error!r}")
        counts["ready"].set()


async def drill(seconds: float, hang: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="assern-drill-") as tmp:
        env, work = world(Path(tmp))
        params = StdioServerParameters(command=script("assern"), args=["serve"], env=env, cwd=str(work))
        counts: dict[str, dict[str, Any]] = {
            era: {
                "ok": 0,
                "failed": 0,
                "hung": 0,
                "disconnects": 0,
                "works_after": False,
                "slowest_ok_ms": 0.0,
                "errors": [],
                "ready": trio.Event(),
            }
            for era in ERAS
        }
        figures: dict[str, Any] = {}
        try:
            async with trio.open_nursery() as nursery:
                for era in ERAS:  # one after the other: the first starts the daemon
                    nursery.start_soon(client, era, params, seconds, hang, counts[era])
                    await counts[era]["ready"].wait()
                await trio.sleep(seconds / 2)
                old = await trio.to_thread.run_sync(daemon_pid, env, work)
                assert old is not None, "no daemon answered assernctl status"
                tree = descendants(old)
                os.kill(old, signal.SIGKILL)
                figures["killed_pid"] = old
                figures["old_tree"] = len(tree)
            figures["new_pid"] = await trio.to_thread.run_sync(daemon_pid, env, work)
            with trio.move_on_after(10):
                while any(alive(pid) for pid in tree):  # noqa: ASYNC110 - other processes
                    await trio.sleep(0.05)
            figures["old_tree_left"] = sum(1 for pid in tree if alive(pid))
            log = Path(env["ASSERN_HOME"]) / "logs" / "assern.log"
            lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
            figures["resumes"] = [
                {k: e.get(k) for k in ("why", "resume_s", "requests_failed")}
                for e in lines
                if e.get("event") == "session_resumed"
            ]
        finally:
            await trio.run_process(
                [script("assernctl"), "shutdown"],
                env=env,
                cwd=work,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        for era in ERAS:
            counts[era].pop("ready")
        figures["clients"] = counts
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each client calls (20)")
    parser.add_argument("--hang", type=float, default=10.0, help="seconds after which a call counts as hung")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = trio.run(drill, args.seconds, args.hang)
    for era, c in figures["clients"].items():
        print(
            f"{era:11} ok {c['ok']:5}  failed {c['failed']}  hung {c['hung']}  "
            f"disconnects {c['disconnects']}  works afterwards {c['works_after']}  "
            f"slowest ok call {c['slowest_ok_ms']} ms"
        )
    for resumed in figures["resumes"]:
        print(
            f"session_resumed: {resumed['why']} in {resumed['resume_s']} s, "
            f"{resumed['requests_failed']} failed"
        )
    print(
        f"daemon {figures['killed_pid']} killed (its tree: {figures['old_tree']} processes, "
        f"{figures['old_tree_left']} left); new daemon {figures['new_pid']}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
