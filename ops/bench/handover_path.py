"""What the resuming bridge costs a daemon session: the byte bridge against it, one run.

    .venv/bin/python ops/bench/handover_path.py
    .venv/bin/python ops/bench/handover_path.py --calls 2000 --json handover.json

One workstation daemon serves one bench backend (ops/bench/bench_server.py). Two
sessions join it from the same folder:

- "resuming": `assern serve`, as a client starts it (app/quick.py, then the resuming
  bridge of app/handover.py, which reads every line as JSON-RPC);
- "bytes": the same hello and welcome, then the byte bridge of app/bridge.py (what a
  daemon session ran before it resumed sessions; the per-configuration path still does).

Each sends `initialize`, `tools/list`, then sequential `b01_echo` calls, in blocks that
alternate between the two (so whatever the machine does meanwhile hits both alike).
Printed: the median and p99 of a call through each and the ratio resuming / bytes; each
bridge's PSS after the calls; and how long each takes to exit once its stdin closes,
and on SIGTERM (fresh sessions for that).

And how long the resuming bridge takes to exit when its client closes stdin while it
resumes (median and max of `--exits` fresh sessions): the daemon is stopped (SIGSTOP)
under a call, the bridge gives up on it (`ASSERN_DAEMON_LIVENESS` 0.1 s, the call's
error), and its resume waits for a welcome the stopped daemon never sends (up to 30 s);
its client then closes stdin. The daemon is continued (SIGCONT) after each.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from daemon_fanout import pss_kib, script  # noqa: E402
from measure import percentile  # noqa: E402
from serve_client import line  # noqa: E402

#: The pre-resume shim: hello, welcome, then the byte bridge (app/bridge.py).
BYTES_SHIM = """
import os, sys
from assern.app.bridge import exec_bridge
from assern.app.control_client import connect_unix
from assern.app.daemon.hello import hello_line, read_welcome
sock = connect_unix(sys.argv[1], 10)
sock.sendall(hello_line(cwd=os.getcwd(), environ=os.environ, config=None, project=None, profile=None))
if read_welcome(sock) is None:
    sys.exit("no welcome")
sock.settimeout(None)
exec_bridge(sock, slot="daemon", log_file=sys.argv[2], log_level="info")
"""


def world(root: Path) -> dict[str, str]:
    home, assern_home, work = root / "home", root / "assern-home", root / "work"
    for folder in (home, assern_home, work):
        folder.mkdir(parents=True)
    args = json.dumps([str(HERE / "bench_server.py"), "--name", "b01", "--tools", "3"])
    (assern_home / "config.toml").write_text(
        f"[servers.b01]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
    )
    return {
        "HOME": str(home),
        "ASSERN_HOME": str(assern_home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }


class Shim:
    """One session's process, spoken to with raw JSON lines."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.answer(self.send(method, params))

    def start(self) -> Shim:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        self.ask("initialize", hello)
        assert self.process.stdin is not None
        self.process.stdin.write(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.ask("tools/list")
        return self

    def call(self) -> float:
        started = time.perf_counter()
        answer = self.ask("tools/call", {"name": "b01_echo", "arguments": {"text": "x"}})
        if "error" in answer or answer["result"].get("isError"):
            raise RuntimeError(f"the call failed: {answer}")
        return time.perf_counter() - started

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Write a request without waiting for its answer; its id."""
        assert self.process.stdin is not None
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.process.stdin.write(line(message))
        self.process.stdin.flush()
        return self.next_id

    def answer(self, ident: int) -> dict[str, Any]:
        """The answer to request `ident` (what comes before it is skipped)."""
        assert self.process.stdout is not None
        while True:
            raw = self.process.stdout.readline()
            if not raw:
                raise RuntimeError(f"the session ended before answering request {ident}")
            answer: dict[str, Any] = json.loads(raw)
            if answer.get("id") == ident:
                return answer

    def exit_seconds(self, how: str) -> float:
        assert self.process.stdin is not None
        started = time.perf_counter()
        if how == "stdin":
            self.process.stdin.close()
        else:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        return time.perf_counter() - started


def shims(env: dict[str, str], root: Path) -> dict[str, Shim]:
    work = root / "work"
    socket_path = socket_file(env)
    log_file = str(Path(env["ASSERN_HOME"]) / "logs" / "assern.log")
    return {
        "resuming": Shim([script("assern"), "serve"], env, work).start(),
        "bytes": Shim([sys.executable, "-c", BYTES_SHIM, socket_path, log_file], env, work).start(),
    }


def daemon_pid(env: dict[str, str], root: Path) -> int:
    done = subprocess.run(
        [script("assernctl"), "status", "--json"], env=env, cwd=root, capture_output=True, check=True
    )
    pid = json.loads(done.stdout)["workstation"]["daemon"]["pid"]
    assert isinstance(pid, int)
    return pid


def resume_exit_seconds(env: dict[str, str], root: Path, daemon: int) -> float:
    """A fresh resuming session whose daemon hangs under a call: the time from its client
    closing stdin, during the resume that follows, to its exit (see the module)."""
    shim = Shim([script("assern"), "serve"], {**env, "ASSERN_DAEMON_LIVENESS": "0.1"}, root / "work").start()
    os.kill(daemon, signal.SIGSTOP)
    try:
        ident = shim.send("tools/call", {"name": "b01_echo", "arguments": {"text": "x"}})
        answer = shim.answer(ident)
        if "error" not in answer:
            raise RuntimeError(f"the call was answered by a stopped daemon: {answer}")
        time.sleep(0.3)  # well into the resume's wait for a welcome
        if shim.process.poll() is not None:
            raise RuntimeError("the session ended before its client did")
        return shim.exit_seconds("stdin")
    finally:
        os.kill(daemon, signal.SIGCONT)


def socket_file(env: dict[str, str]) -> str:
    from assern.app.daemon.hello import socket_folder

    folder = socket_folder(env["ASSERN_HOME"], env, os.getuid())
    assert folder is not None
    return os.path.join(folder, "daemon.sock")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000, help="calls through each bridge (1000)")
    parser.add_argument("--block", type=int, default=25, help="calls per block (25)")
    parser.add_argument("--exits", type=int, default=5, help="exits timed of each kind and way (5)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="assern-handover-bench-") as tmp:
        root = Path(tmp)
        env = world(root)
        try:
            first = shims(env, root)  # the resuming one starts the daemon
            for shim in first.values():
                for _ in range(50):
                    shim.call()  # warm-up
            samples: dict[str, list[float]] = {kind: [] for kind in first}
            order = list(first)
            while len(samples["bytes"]) < args.calls:
                for kind in order:
                    samples[kind].extend(first[kind].call() for _ in range(args.block))
                order.reverse()
            for kind, shim in first.items():
                figures[kind] = {
                    "call_median_ms": statistics.median(samples[kind]) * 1000,
                    "call_p99_ms": percentile(samples[kind], 99) * 1000,
                    "pss_kib": pss_kib(shim.process.pid),
                    "exit_stdin_ms": [],
                    "exit_sigterm_ms": [],
                }
            for kind, shim in first.items():
                figures[kind]["exit_stdin_ms"].append(shim.exit_seconds("stdin") * 1000)
            for _ in range(args.exits):
                for how in ("stdin", "sigterm"):
                    for kind, shim in shims(env, root).items():
                        figures[kind][f"exit_{how}_ms"].append(shim.exit_seconds(how) * 1000)
            daemon = daemon_pid(env, root)
            figures["resuming"]["exit_stdin_resuming_ms"] = [
                resume_exit_seconds(env, root, daemon) * 1000 for _ in range(args.exits)
            ]
        finally:
            subprocess.run(
                [script("assernctl"), "shutdown"], env=env, cwd=root, capture_output=True, check=False
            )
    for kind in ("bytes", "resuming"):
        f = figures[kind]
        print(
            f"{kind:9} call median {f['call_median_ms']:.3f} ms  p99 {f['call_p99_ms']:.3f} ms  "
            f"PSS {f['pss_kib'] / 1024:.1f} MB  exit on stdin close max {max(f['exit_stdin_ms']):.1f} ms  "
            f"on SIGTERM max {max(f['exit_sigterm_ms']):.1f} ms"
        )
    during = figures["resuming"]["exit_stdin_resuming_ms"]
    print(
        f"resuming exit on stdin close during a resume: median {statistics.median(during):.1f} ms  "
        f"max {max(during):.1f} ms  ({len(during)} sessions)"
    )
    ratio = figures["resuming"]["call_median_ms"] / figures["bytes"]["call_median_ms"]
    figures["ratio_call_median"] = ratio
    print(f"call median resuming / bytes: {ratio:.3f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
