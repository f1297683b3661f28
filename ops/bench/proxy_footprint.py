"""What every extra AI session costs: an `assern serve` that proxies to a running primary.

Starts `assern daemon` on one benchmark backend, then measures, in one run:

- **spawn to first answer**: from starting `assern serve` until its `initialize` is
  answered through the primary, for a start that finds its hint (the quick path, the
  usual case) and for one that does not (hints removed first: the full resolution and
  election, then `exec` into the bridge);
- **resident memory** of each proxy (VmRSS, once it serves), and the total of 1, 10 and
  50 proxies connected at once (RSS, and PSS, which shares the interpreter's pages among
  the processes that map them), beside the primary's own;
- **the primary's call overhead** with 50 proxies connected: sequential `tools/call`
  round trips through one proxy, with no other session and then with 50 idle ones.

Figures only, never assertions:

    python ops/bench/proxy_footprint.py            # about a minute on 2 cores
    python ops/bench/proxy_footprint.py --json out.json
    python ops/bench/proxy_footprint.py --smoke    # a few samples, for the test suite
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from procs import pss_kb  # noqa: E402

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def assern_script(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit(f"`{name}` is not installed beside {sys.executable}: pip install '.[test]' first")
    return found


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError(pid)


def pss_kib(pid: int) -> int:
    """Proportional set size: shared pages (the interpreter's) divided among their users."""
    found = pss_kb(pid)
    if not found:
        raise LookupError(pid)
    return found


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(samples: Sequence[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p99_ms": percentile(samples, 0.99) * 1000,
        "min_ms": min(samples) * 1000,
        "n": len(samples),
    }


class Session:
    """One `assern serve` spoken to in raw JSON lines."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        self._stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]  # PIPE was asked
        self._stdout: IO[bytes] = self.process.stdout  # type: ignore[assignment]
        self._buffer = b""
        self._next_id = 10

    def send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")

    def reply(self, request_id: int) -> dict[str, Any]:
        while True:
            while b"\n" not in self._buffer:
                chunk = self._stdout.read(65536)
                if not chunk:
                    raise RuntimeError(f"assern serve (pid {self.process.pid}) closed its stdout")
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message

    def initialize(self) -> float:
        """Seconds from spawn to the answered `initialize`."""
        self.send(INITIALIZE)
        self.reply(1)
        answered = time.perf_counter() - self.started
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answered

    def call(self) -> float:
        self._next_id += 1
        params = {"name": "bench_echo", "arguments": {"text": "x"}}
        began = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call", "params": params})
        answer = self.reply(self._next_id)
        took = time.perf_counter() - began
        if "result" not in answer:
            raise RuntimeError(f"the call failed: {answer}")
        return took

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stdout.close()


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.work = root / "work"
        self.work.mkdir(parents=True)
        self.config = root / "config.toml"
        self.config.write_text(
            "[servers.bench]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(HERE / 'bench_server.py'))}, '--tools', '10', '--name', 'bench']\n"
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ASSERN_")}
        self.env["ASSERN_HOME"] = str(self.home)
        self.env["ASSERN_NO_DAEMON"] = "1"  # the proxies of `assern daemon --config`, as measured
        self.serve_argv = [assern_script("assern"), "serve", "--config", str(self.config)]

    def session(self) -> Session:
        return Session(self.serve_argv, self.env, self.work)

    def forget_hints(self) -> None:
        shutil.rmtree(self.home / "run" / "hints", ignore_errors=True)

    @contextlib.contextmanager
    def primary(self) -> Iterator[int]:
        daemon = subprocess.Popen(
            [assern_script("assern"), "daemon", "--config", str(self.config)],
            env=self.env,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            assert daemon.stderr is not None
            daemon.stderr.readline()  # "assern daemon: pid …": it listens
            warm = self.session()  # the backend is ready once a call is answered
            warm.initialize()
            deadline = time.monotonic() + 30
            while True:
                try:
                    warm.call()
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            warm.close()
            yield daemon.pid
        finally:
            subprocess.run(
                [assern_script("assernctl"), "shutdown", "--config", str(self.config)],
                env=self.env,
                cwd=self.work,
                capture_output=True,
                check=False,
            )
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def spawn_times(world: World, count: int, *, hinted: bool) -> tuple[list[float], list[int]]:
    times, rss = [], []
    for _ in range(count):
        if not hinted:
            world.forget_hints()
        session = world.session()
        try:
            times.append(session.initialize())
            session.call()  # it serves: it is the bridge by now
            rss.append(rss_kib(session.process.pid))
        finally:
            session.close()
    return times, rss


def concurrent(world: World, count: int, primary: int) -> dict[str, Any]:
    sessions = [world.session() for _ in range(count)]
    try:
        for session in sessions:
            session.initialize()
        for session in sessions:
            session.call()
        each = [rss_kib(s.process.pid) for s in sessions]
        return {
            "proxies": count,
            "total_mib": sum(each) / 1024,
            "total_pss_mib": sum(pss_kib(s.process.pid) for s in sessions) / 1024,
            "each_median_mib": statistics.median(each) / 1024,
            "primary_mib": rss_kib(primary) / 1024,
        }
    finally:
        for session in sessions:
            session.close()


def call_overhead(world: World, calls: int, idle: int) -> dict[str, float]:
    others = [world.session() for _ in range(idle)]
    probe = world.session()
    try:
        for session in others:
            session.initialize()
        probe.initialize()
        for _ in range(min(100, calls)):
            probe.call()  # warm up
        return {"idle_sessions": idle, **ms([probe.call() for _ in range(calls)])}
    finally:
        probe.close()
        for session in others:
            session.close()


def run(spawns: int, calls: int, sizes: Sequence[int]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="assern-proxy-bench-") as tmp:
        world = World(Path(tmp))
        report: dict[str, Any] = {}
        with world.primary() as primary:
            full, full_rss = spawn_times(world, max(3, spawns // 4), hinted=False)
            spawn_times(world, 1, hinted=False)  # leaves the hint the quick path uses
            quick, quick_rss = spawn_times(world, spawns, hinted=True)
            report["spawn_to_initialize"] = {"hint": ms(quick), "full": ms(full)}
            report["proxy_rss_mib"] = {
                "hint": statistics.median(quick_rss) / 1024,
                "full": statistics.median(full_rss) / 1024,
            }
            report["concurrent"] = [concurrent(world, size, primary) for size in sizes]
            report["call"] = [call_overhead(world, calls, idle) for idle in (0, max(sizes))]
    return report


def print_report(report: dict[str, Any]) -> None:
    spawn, rss = report["spawn_to_initialize"], report["proxy_rss_mib"]
    print("assern serve as a proxy of a running primary")
    for path, label in (("hint", "with its hint (quick path)"), ("full", "without (full election)")):
        s = spawn[path]
        print(
            f"  spawn -> initialize answered, {label:27} median {s['median_ms']:6.1f} ms  "
            f"p99 {s['p99_ms']:6.1f} ms  (n={s['n']})   RSS {rss[path]:5.1f} MiB"
        )
    print("  connected at once:")
    for row in report["concurrent"]:
        print(
            f"    {row['proxies']:3d} proxies: RSS {row['total_mib']:6.1f} MiB in all "
            f"({row['each_median_mib']:.1f} MiB each), PSS {row['total_pss_mib']:6.1f} MiB in all; "
            f"primary {row['primary_mib']:.1f} MiB"
        )
    print("  tools/call round trip through one proxy:")
    base = report["call"][0]["median_ms"]
    for row in report["call"]:
        print(
            f"    {row['idle_sessions']:3d} other sessions: median {row['median_ms']:.3f} ms  "
            f"p99 {row['p99_ms']:.3f} ms  (x{row['median_ms'] / base:.2f})"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spawns", type=int, default=40, help="starts measured with a hint")
    parser.add_argument("--calls", type=int, default=2000, help="calls per overhead measure")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--smoke", action="store_true", help="a few samples (the test suite runs this)")
    args = parser.parse_args(argv)
    if args.smoke:
        report = run(spawns=3, calls=20, sizes=(1, 3))
    else:
        report = run(spawns=args.spawns, calls=args.calls, sizes=(1, 10, 50))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
