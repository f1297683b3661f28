"""What a workstation holds for three projects with two client sessions each: one
instance per configuration (no daemon) against the workstation daemon, in the same run.

    .venv/bin/python ops/bench/daemon_fanout.py
    .venv/bin/python ops/bench/daemon_fanout.py --projects 3 --sessions 2 --json fanout.json

The world: a private HOME and ASSERN_HOME whose global config has three real stdio
servers (the bundled notes and calculator examples and the reference `mcp-server-time`),
and N project folders (`[projects.pN] directories = [...]`); the first project adds one
server of its own (the time server in another timezone). In each project, M clients
start `assern serve` in that folder, each speaking MCP on its pipes (initialize, then
`tools/list`), and stay connected while every process is counted:

- "instances": the daemon turned off (`ASSERN_NO_DAEMON=1`, the shape before the
  daemon): each configuration's first `assern serve` becomes its primary (and forks; its
  launcher waits) and the others proxy to it;
- "daemon": `assern daemon` runs first (as a service would): every `assern serve` joins it;
- "started": no daemon runs: the first `assern serve` starts it and every one joins it
  (what a user gets with no service installed).

For each, after every session listed its tools: the number of processes of that
ASSERN_HOME (assern's own, backends apart) and of backends, and the summed PSS of each
group (every process the test started and every one they started, by /proc). The
daemon's extra session cost is the PSS of one joined `assern serve` (the shim). Kinds
run one after the other (`--rounds` times each, taking turns); medians are printed with
the ratio daemon / instances.
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

# isort: split
from serve_client import spawn_listing

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
BACKEND_MARKERS = ("notes_server", "calc_server", "mcp_server_time")


def script(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit(f"the `{name}` console script is not installed beside this Python")
    return found


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def ours(home: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose ASSERN_HOME is `home`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state in ("Z", "X"):
            continue
        if f"ASSERN_HOME={home}".encode() in environ:
            found.append((int(entry.name), cmdline))
    return found


def world(root: Path, projects: int) -> tuple[dict[str, str], list[Path]]:
    home = root / "home"
    assern_home = root / "assern-home"
    folders = [root / f"p{index}" for index in range(projects)]
    for folder in (home, assern_home, *folders):
        folder.mkdir(parents=True)
    text = (EXAMPLES / "default.toml").read_text()
    for index, folder in enumerate(folders):
        text += f'\n[projects.p{index}]\ndirectories = ["{folder}"]\n'
    text += (
        '\n[projects.p0.servers.clock]\ncommand = "${ASSERN_PYTHON}"\n'
        'args = ["-m", "mcp_server_time", "--local-timezone", "Europe/Riga"]\n'
    )
    (assern_home / "config.toml").write_text(text)
    env = {
        "HOME": str(home),
        "ASSERN_HOME": str(assern_home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    return env, folders


def session(env: dict[str, str], folder: Path) -> subprocess.Popen[bytes]:
    """`assern serve` in `folder`, initialized and listed."""
    process = spawn_listing([script("assern"), "serve"], env=env, cwd=folder, stderr=None)
    assert process.stdout is not None
    while True:
        raw = process.stdout.readline()
        if not raw:
            raise RuntimeError("assern serve ended before listing")
        if json.loads(raw).get("id") == 2:
            return process


def settle(env: dict[str, str], backends: int, limit: float = 120.0) -> None:
    """Wait until `backends` backend processes run (every session's backends started)."""
    home = Path(env["ASSERN_HOME"])
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        running = [p for p, cmd in ours(home) if any(m in cmd for m in BACKEND_MARKERS)]
        if len(running) >= backends:
            time.sleep(1.0)  # let them finish their imports
            return
        time.sleep(0.1)


def measure(env: dict[str, str]) -> dict[str, Any]:
    home = Path(env["ASSERN_HOME"])
    found = ours(home)
    backends = [(p, c) for p, c in found if any(m in c for m in BACKEND_MARKERS)]
    assern = [(p, c) for p, c in found if (p, c) not in backends]
    shims = [p for p, c in assern if "bridge.py" in c]
    return {
        "assern_processes": len(assern),
        "backend_processes": len(backends),
        "assern_pss_mb": round(sum(pss_kib(p) for p, _ in assern) / 1024, 1),
        "backend_pss_mb": round(sum(pss_kib(p) for p, _ in backends) / 1024, 1),
        "shim_pss_mb": round(statistics.median([pss_kib(p) for p in shims]) / 1024, 1) if shims else None,
    }


def one_round(kind: str, projects: int, sessions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="assern-fanout-") as tmp:
        env, folders = world(Path(tmp), projects)
        if kind == "instances":
            env["ASSERN_NO_DAEMON"] = "1"
        daemon = None
        if kind == "daemon":
            daemon = subprocess.Popen(
                [script("assern"), "daemon"], env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            assert daemon.stderr is not None
            daemon.stderr.readline()  # "assern daemon: pid …": it listens
        clients = [session(env, folder) for folder in folders for _ in range(sessions)]
        expected = 3 * projects + 1 if kind == "instances" else 4
        settle(env, expected)
        figures = measure(env)
        figures["total_pss_mb"] = round(figures["assern_pss_mb"] + figures["backend_pss_mb"], 1)
        for client in clients:
            assert client.stdin is not None
            client.stdin.close()
        for client in clients:
            client.wait(timeout=30)
        if kind != "instances":
            subprocess.run(
                [script("assernctl"), "shutdown"], env=env, cwd=tmp, capture_output=True, check=False
            )
        if daemon is not None:
            daemon.wait(timeout=30)
        deadline = time.monotonic() + 30
        while ours(Path(env["ASSERN_HOME"])) and time.monotonic() < deadline:
            time.sleep(0.2)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--projects", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=2, help="client sessions per project")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each kind, taking turns")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"instances": [], "daemon": [], "started": []}
    for _ in range(args.rounds):
        for kind in runs:
            runs[kind].append(one_round(kind, args.projects, args.sessions))
    report: dict[str, Any] = {"projects": args.projects, "sessions_per_project": args.sessions}
    for kind, found in runs.items():
        report[kind] = {
            key: statistics.median(r[key] for r in found)
            for key in found[0]
            if all(r[key] is not None for r in found)
        }
        figures = report[kind]
        print(
            f"{kind}: {figures['assern_processes']:g} assern processes, "
            f"{figures['backend_processes']:g} backend processes; PSS {figures['total_pss_mb']:.1f} MB "
            f"in all ({figures['assern_pss_mb']:.1f} MB assern, {figures['backend_pss_mb']:.1f} MB backends)"
            + (f"; one joined session {figures['shim_pss_mb']:.1f} MB" if "shim_pss_mb" in figures else "")
        )
    for kind in ("daemon", "started"):
        ratio = report[kind]["total_pss_mb"] / report["instances"]["total_pss_mb"]
        report[f"{kind}_over_instances_pss"] = round(ratio, 3)
        print(f"{kind} / instances, total PSS (medians of {args.rounds} rounds): {ratio:.3f}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
