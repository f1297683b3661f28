"""What the build id costs a client's `assern serve`, which computes it on every start.

    .venv/bin/python ops/bench/build_id.py                 # 15 runs of each kind, in turn
    .venv/bin/python ops/bench/build_id.py --runs 3 --json build_id.json

Each run is a fresh interpreter that imports `assern.app.quick` (what the shim imports
before it builds its hello), then times `build_id` (app/daemon/identity.py) on this
install, in a private `$ASSERN_HOME`. Kinds, taking turns so the machine's drift hits
them alike:

- "cold": no cache (removed before the run): every file is read and digested, and the
  cache is written;
- "cached": the cache of the previous run holds: one `stat` a file;
- "no home": no `$ASSERN_HOME` folder, so nothing is kept (what a first start ever pays
  before anything made the folder).

Prints the number of files and bytes digested, the median and slowest milliseconds of
each kind, and what importing `assern.app.daemon.identity` loads beyond a bare
interpreter, with each module's own import time (from `python -X importtime`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import sys, time
import assern.app.quick
from assern.app.daemon.identity import build_id
home = sys.argv[1] or None
started = time.perf_counter()
build = build_id(home)
print(json.dumps({"ms": (time.perf_counter() - started) * 1000, "build": build}))
"""


def one_run(home: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + PROBE, home], capture_output=True, text=True, check=True
    )
    ms: float = json.loads(done.stdout)["ms"]
    return ms


def _imported(code: str) -> dict[str, int]:
    """The modules `code` imports (name: self time in us), from `python -X importtime`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    )
    found = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            timing, _, name = line.removeprefix("import time:").rpartition("|")
            found[name.strip()] = int(timing.split("|")[0].strip())
    return found


def identity_imports() -> list[str]:
    """What importing the identity module loads beyond a bare interpreter (self time)."""
    bare = _imported("pass")
    found = _imported("import assern.app.daemon.identity")
    return [f"{name} {us} us" for name, us in found.items() if name not in bare]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each kind (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    from assern.app.daemon.identity import PACKAGE_ROOT, package_files

    files = package_files(PACKAGE_ROOT)
    size = sum(stat[1] for stat, _ in files)
    runs: dict[str, list[float]] = {"cold": [], "cached": [], "no home": []}
    with tempfile.TemporaryDirectory(prefix="assern-build-id-") as tmp:
        home = Path(tmp) / "assern"
        home.mkdir()
        for _ in range(args.runs):
            shutil.rmtree(home / "cache", ignore_errors=True)
            runs["cold"].append(one_run(str(home)))
            runs["cached"].append(one_run(str(home)))
            runs["no home"].append(one_run(str(Path(tmp) / "missing")))
    report: dict[str, object] = {"files": len(files), "bytes": size}
    print(f"files digested: {len(files)} ({size / 1e6:.2f} MB)")
    for kind, values in runs.items():
        median, slowest = statistics.median(values), max(values)
        report[kind] = {"median_ms": round(median, 3), "max_ms": round(slowest, 3), "runs": len(values)}
        print(f"{kind:>8}: median {median:.2f} ms, slowest {slowest:.2f} ms ({len(values)} runs)")
    extra = identity_imports()
    report["identity_imports"] = extra
    print("importing the identity module loads: " + ", ".join(extra))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
