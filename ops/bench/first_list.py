"""How long a client waits for its first `tools/list`, with and without saved lists.

    .venv/bin/python ops/bench/first_list.py              # 8 starts of each kind, in turn
    .venv/bin/python ops/bench/first_list.py --starts 3 --json first_list.json
    .venv/bin/python ops/bench/first_list.py --a 006bd20 --b worktree --daemon --starts 7

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

With `--a REV --b REV` it measures two builds in one run: each is a git revision,
`worktree` or `current`, as ab.py takes them (builds.py installs them). Each build has
its own homes (and its own daemon, with `--daemon`), and each kind's starts take turns
A, B, B, A, A, B, ... so that what the machine does meanwhile hits both alike. Printed
per kind: each build's median, p90 and slowest first list, its call and exit medians,
and the ratios B ÷ A, of the medians and "paired starts" (the median over rounds of B's
start ÷ A's start right before or after it, which a load that changes during the run
moves less); with the load average before and after the starts. A build measures what
it does: on a build from before the kept first answers, "started" is a start that
waits for the daemon it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

# isort: split
import builds
import procs
from measure import percentile
from serve_client import line, spawn_listing

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parents[1] / "examples" / "default.toml"


@attrs.frozen
class Build:
    """One build under measure, with the homes its starts use."""

    label: str  # "A" or "B"; "" when one build is measured
    rev: str  # as given: a git revision, "worktree" or "current"
    script: Path  # its `assern`
    root: Path  # its folder of homes

    @property
    def home(self) -> Path:
        """The isolated instances' home ("cold" and "warm")."""
        return self.root / "home"

    @property
    def daemon_home(self) -> Path:
        """The running daemon's home ("daemon")."""
        return self.root / "daemon-home"

    @property
    def started_home(self) -> Path:
        """The home whose daemon each start starts ("started")."""
        return self.root / "started-home"


def environ(home: Path, *, isolated: bool) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "ASSERN_HOME": str(home / "assern"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    if isolated:
        env["ASSERN_NO_INSTANCE_SHARING"] = "1"
    return env


def one_start(script: Path, home: Path, work: Path, *, isolated: bool = True) -> dict[str, Any]:
    """Spawn, handshake, list; the seconds to the list's answer and what came before it."""
    env = environ(home, isolated=isolated)
    started = time.perf_counter()
    process = spawn_listing(
        [str(script), "serve", "--config", str(CONFIG)], env=env, cwd=work, client="first-list-bench"
    )
    assert process.stdin is not None
    assert process.stdout is not None
    changed = 0
    while True:
        raw = process.stdout.readline()
        if not raw:
            raise RuntimeError(f"{script} ended before answering tools/list")
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


def stop_daemon(script: Path, home: Path) -> None:
    """`assernctl shutdown` of the daemon a start left running (it waits for its exit)."""
    subprocess.run(
        [str(script.with_name("assernctl")), "shutdown"],
        env=environ(home, isolated=False),
        cwd=home,
        capture_output=True,
        check=False,
    )


@contextlib.contextmanager
def running_daemon(build: Build) -> Iterator[None]:
    """`assern daemon` of the build in its daemon home, listening; stopped (SIGTERM) on exit."""
    log = build.root / "daemon.stderr"
    name = f"{build.label}: `assern daemon`" if build.label else "`assern daemon`"
    with log.open("wb") as stderr:
        daemon = subprocess.Popen(
            [str(build.script), "daemon"],
            env=environ(build.daemon_home, isolated=False),
            cwd=build.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + builds.DAEMON_WAIT
        while builds.DAEMON_READY not in log.read_bytes():
            if daemon.poll() is not None:
                raise SystemExit(f"{name} exited ({daemon.returncode}): {log.read_text()}")
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not listen in {builds.DAEMON_WAIT:g} s: {log.read_text()}")
            time.sleep(0.05)
        yield
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=builds.DAEMON_WAIT)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def start(build: Build, kind: str, work: Path) -> dict[str, Any]:
    """One start of `kind` with this build, timed."""
    if kind == "cold":
        shutil.rmtree(build.home / "assern" / "cache" / "catalogs", ignore_errors=True)
    if kind == "daemon":
        return one_start(build.script, build.daemon_home, work, isolated=False)
    if kind == "started":
        try:
            return one_start(build.script, build.started_home, work, isolated=False)
        finally:
            stop_daemon(build.script, build.started_home)
    return one_start(build.script, build.home, work)


def measure_builds(
    measured: Sequence[Build], kinds: Sequence[str], starts: int, work: Path
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every build's starts of every kind, by build label and kind. In each round every
    kind has one start of each build, the builds' order turning from round to round."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        b.label: {kind: [] for kind in kinds} for b in measured
    }
    with contextlib.ExitStack() as stack:
        for build in measured:
            if "daemon" in kinds:
                stack.enter_context(running_daemon(build))
                one_start(
                    build.script, build.daemon_home, work, isolated=False
                )  # its view starts, lists saved
            if "started" in kinds:
                # each starts a daemon, stopped after. The first saves the lists, but its daemon
                # knew no backend's capabilities when it answered `initialize`, so a build that
                # keeps first answers keeps none from it; the second's daemon remembers them
                for _ in range(2):
                    start(build, "started", work)
            one_start(build.script, build.home, work)  # a warm-up, which also saves the lists
        for round_ in range(starts):
            order = measured if round_ % 2 == 0 else measured[::-1]
            for kind in kinds:
                for build in order:
                    runs[build.label][kind].append(start(build, kind, work))
    return runs


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def summary(found: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One build's figures for one kind, from its starts."""
    seconds = [r["seconds"] for r in found]
    return {
        "starts": len(found),
        "list_ms": [ms(second) for second in seconds],  # each start's, in the order they ran
        "exit_median_ms": ms(statistics.median(r["exit_seconds"] for r in found)),
        "call_median_ms": ms(statistics.median(r["call_seconds"] for r in found)),
        "median_ms": ms(statistics.median(seconds)),
        "p90_ms": ms(percentile(seconds, 0.9)),
        "max_ms": ms(max(seconds)),
        "tools": sorted({r["tools"] for r in found}),
        "list_changed_before": sum(r["list_changed_before"] for r in found),
    }


def one_build_report(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Prints one build's figures, kind by kind; returns them."""
    report: dict[str, Any] = {}
    for kind, found in runs.items():
        report[kind] = summary(found)
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
    return report


#: the columns of the two-build table: (heading, key of a summary)
COLUMNS = (
    ("list median", "median_ms"),
    ("list p90", "p90_ms"),
    ("slowest", "max_ms"),
    ("call median", "call_median_ms"),
    ("exit median", "exit_median_ms"),
)


def two_builds_figures(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Per kind: A's and B's figures and the ratios B ÷ A (with the paired starts')."""
    cases: dict[str, Any] = {}
    for kind in runs["A"]:
        a, b = summary(runs["A"][kind]), summary(runs["B"][kind])
        ratios = {key: round(b[key] / a[key], 3) for _, key in COLUMNS}
        paired = builds.paired_ratio(
            [r["seconds"] for r in runs["A"][kind]], [r["seconds"] for r in runs["B"][kind]]
        )
        ratios["paired"] = round(paired, 3)
        cases[kind] = {"A": a, "B": b, "b_over_a": ratios}
    return cases


def two_builds_report(out: dict[str, Any]) -> str:
    a, b = out["builds"]["A"], out["builds"]["B"]
    starts = out["starts"]
    rows = [
        f"A = {a['rev']}, B = {b['rev']}",
        f"spawn to the first tools/list answer and to the answer of a tools/call sent after it, "
        f"{starts} starts of each build per kind, taking turns A, B, B, A, ...",
        f"{out['machine']['cpus']} CPUs, load average {out['machine']['loadavg_before']} (1, 5, 15 min) "
        f"before the starts, {out['machine']['loadavg_after']} after",
    ]
    header = f"{'kind':<8} {'build':<6}" + "".join(f" {title:>12}" for title, _ in COLUMNS)
    header += f" {'paired starts':>14} {'tools':>6} {'list_changed':>13}"
    rows += [header, "-" * len(header)]
    for kind, case in out["cases"].items():
        for label in ("A", "B"):
            figures = case[label]
            tools = ",".join(str(count) for count in figures["tools"])
            rows.append(
                f"{kind if label == 'A' else '':<8} {label:<6}"
                + "".join(f" {figures[key]:>9.1f} ms" for _, key in COLUMNS)
                + f" {'':>14} {tools:>6} {figures['list_changed_before']:>13}"
            )
        ratios = case["b_over_a"]
        rows.append(
            f"{'':<8} {'B ÷ A':<6}"
            + "".join(f" {ratios[key]:>12.3f}" for _, key in COLUMNS)
            + f" {ratios['paired']:>14.3f}"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=8, help="starts of each kind (8)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--daemon", action="store_true", help="also time starts that join a running daemon")
    parser.add_argument("--a", help="build A: a git revision, 'worktree' or 'current' (with --b)")
    parser.add_argument("--b", help="build B, measured in turn with A (with --a)")
    args = parser.parse_args(argv)
    if (args.a is None) != (args.b is None):
        parser.error("--a and --b go together: the two builds measured in turn")
    if args.starts < 1:
        parser.error("--starts: at least 1")
    kinds = ("cold", "warm", "daemon", "started") if args.daemon else ("cold", "warm")
    sides = [("", "current")] if args.a is None else [("A", args.a), ("B", args.b)]
    scripts = [builds.install(rev) for _, rev in sides]
    with tempfile.TemporaryDirectory(prefix="assern-first-list-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir(parents=True)
        measured = [
            Build(label, rev, script, Path(tmp) / (label or "build"))
            for (label, rev), script in zip(sides, scripts, strict=True)
        ]
        for build in measured:
            build.root.mkdir()
        loadavg_before = procs.loadavg()
        runs = measure_builds(measured, kinds, args.starts, work)
        loadavg_after = procs.loadavg()
    if args.a is None:
        report = one_build_report(runs[""])
    else:
        report = {
            "builds": {b.label: {"rev": b.rev} for b in measured},
            "starts": args.starts,
            "machine": {
                "cpus": os.cpu_count(),
                "loadavg_before": loadavg_before,
                "loadavg_after": loadavg_after,
            },
            "cases": two_builds_figures(runs),
        }
        print(two_builds_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
