"""The CPU and peak memory of an `assern serve --http` start, with the garbage
collector's full passes deferred during the imports (as assern does, app/loading.py),
with the collector untouched, and with it off altogether.

    .venv/bin/python ops/bench/startup.py               # 12 starts of each, in turn
    .venv/bin/python ops/bench/startup.py --starts 3 --json startup.json

Each start is `assern serve --http 0 --no-stdio` with no backend, in a private
ASSERN_HOME, run as `python -c PRELUDE; assern.app.quick.main()`, the console script's
own entry point. The prelude is empty for "deferred" (as shipped); for "untouched" it
makes `FullCollectionsDeferred` do nothing; for "off" it calls `gc.disable()`. Once the
start has answered an `initialize` posted to its /mcp (everything imported, the tree
running), its user plus system CPU time and its peak RSS (VmHWM) are read from /proc
and it is stopped. The
kinds take turns, so the machine's drift hits them alike; the medians are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from procs import cpu_seconds, peak_rss_kb  # noqa: E402

PRELUDES = {
    "deferred": "",
    "untouched": (
        "import assern.app.loading as loading\n"
        "loading.FullCollectionsDeferred.__enter__ = lambda self: None\n"
        "loading.FullCollectionsDeferred.__exit__ = lambda self, *exc: None\n"
    ),
    "off": "import gc\ngc.disable()\n",
}
ENTRY = "import sys\nfrom assern.app.quick import main\nsys.argv[0] = 'assern'\nsys.exit(main())\n"
#: what `assern serve --http` prints on stderr once it serves
SERVING = b"serving MCP over HTTP at"


def answered(url: str, limit: float) -> None:
    """Post a handshake-era `initialize` to `url`; return once it is answered (the socket
    is bound before the tree loads: the request waits for it)."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "startup-bench", "version": "1"},
        },
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(hello).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    with urllib.request.urlopen(request, timeout=limit) as answer:
        if b'"result"' not in answer.read():
            raise RuntimeError(f"{url} did not answer initialize")


def one_start(prelude: str, work: Path, limit: float = 120.0) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of one start, read once it serves."""
    config = work / "config.toml"
    config.write_text("")
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    env = {**os.environ, "ASSERN_HOME": str(home), "ASSERN_NO_INSTANCE_SHARING": "1"}
    argv = [sys.executable, "-c", prelude + ENTRY, "serve", "--http", "0", "--no-stdio"]
    process = subprocess.Popen(
        [*argv, "--config", str(config)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    seen = b""
    deadline = time.monotonic() + limit
    try:
        while SERVING not in seen:
            line = process.stderr.readline()
            if not line or time.monotonic() > deadline:
                raise RuntimeError(f"the start did not serve: {seen.decode(errors='replace')[-500:]}")
            seen += line
        url = seen.split(SERVING, 1)[1].split()[0].decode()
        answered(url, limit)
        return cpu_seconds(process.pid), peak_rss_kb(process.pid) / 1024
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


def measure(starts: int) -> dict[str, Any]:
    samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in PRELUDES}
    with tempfile.TemporaryDirectory(prefix="assern-startup-bench-") as folder:
        for _ in range(starts):
            for kind, prelude in PRELUDES.items():
                samples[kind].append(one_start(prelude, Path(folder)))
    return {
        kind: {
            "starts": len(found),
            "cpu_s_median": statistics.median(cpu for cpu, _ in found),
            "peak_rss_mb_median": statistics.median(rss for _, rss in found),
        }
        for kind, found in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=12, help="starts of each kind (12)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = measure(args.starts)
    print(f"assern serve --http, until it serves; medians of {args.starts} starts each:")
    for kind, row in figures.items():
        print(
            f"  collector {kind:9}  CPU {row['cpu_s_median']:.2f} s, "
            f"peak RSS {row['peak_rss_mb_median']:.1f} MB"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
