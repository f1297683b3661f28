"""What starting a backend holds assern's trio thread: `setpriv` (vfork) against a
preexec hook (a full fork of assern).

    .venv/bin/python ops/bench/spawn.py              # 200 starts each
    .venv/bin/python ops/bench/spawn.py --starts 20 --json spawn.json

This process first imports what `assern serve` with an HTTP front holds (the serving
tree, the HTTP front and its models), so it has assern's size when it forks. Then,
taking turns, it starts `true` through `supervisor.io.process.spawn` as a backend is
started: with util-linux's `setpriv --pdeathsig TERM` as launcher (no Python in the
child, so CPython starts it with vfork) and with `launcher=()` (the preexec hook that
arms the signal, which needs a full fork). The figure is the time `spawn` takes, which
is the time the trio thread is held (it returns once the child has exec'd). Median,
minimum and p99 of each, and this process's RSS. On a loaded machine the median of
both grows with the wait for a core (the parent waits for its child to exec); the
minimum shows the cost itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

import assern.actors.listener.http.server
import assern.app.tree  # noqa: F401  (assern's size before it forks)
from assern.supervisor.io.process import pdeathsig_launcher, spawn

COMMAND = ["true"]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one(launcher: tuple[str, ...]) -> float:
    """Start COMMAND once with `launcher`; how long `spawn` held this thread (s)."""
    began = time.perf_counter()
    child = spawn(COMMAND, env=dict(os.environ), launcher=launcher)
    held = time.perf_counter() - began
    for stream in (child.stdin, child.stdout, child.stderr):
        await stream.aclose()
    await child.wait()
    return held


async def measure(starts: int) -> dict[str, Any]:
    launcher = pdeathsig_launcher()
    if launcher is None:
        raise SystemExit("no setpriv with --pdeathsig on this machine: nothing to compare")
    ways = {"setpriv (vfork)": launcher, "preexec hook (fork)": ()}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():  # warm-up
        await one(way)
    for _ in range(starts):
        for name, way in ways.items():
            times[name].append(await one(way))
    figures: dict[str, Any] = {"starts": starts, "rss_mb": round(rss_mb(), 1)}
    for name, samples in times.items():
        ordered = sorted(samples)
        figures[name] = {
            "min_ms": ordered[0] * 1000,
            "median_ms": statistics.median(samples) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=200, help="starts of each kind (200)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = trio.run(measure, args.starts)
    print(f"starting a backend from a {figures['rss_mb']} MB assern, {args.starts} starts each:")
    for name in ("setpriv (vfork)", "preexec hook (fork)"):
        row = figures[name]
        print(
            f"  {name:20} median {row['median_ms']:.2f} ms, min {row['min_ms']:.2f} ms, "
            f"p99 {row['p99_ms']:.2f} ms"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
