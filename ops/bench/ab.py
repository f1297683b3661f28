"""A/B: two builds of assern measured interleaved in one run, against a direct connection.

    .venv/bin/python ops/bench/ab.py                          # 0.1.0 (3de4a78) against the working tree
    .venv/bin/python ops/bench/ab.py --a HEAD --b worktree    # the last commit against the change
    .venv/bin/python ops/bench/ab.py --backends 100           # memory and calls at K = 100
    .venv/bin/python ops/bench/ab.py --a worktree --b worktree --b-settings 'validate = "off"'
    .venv/bin/python ops/bench/ab.py --smoke                  # a few calls (the test suite's run)
    .venv/bin/python ops/bench/ab.py --a worktree --b worktree --b-page   # the status page open on B
    .venv/bin/python ops/bench/ab.py --a 99c19f0 --daemon     # through each build's own daemon

Each side is a build plus optional `[settings]` lines. A build is a git revision or
`worktree` (the checkout as it is, uncommitted changes included), installed with pip
into a virtualenv of its own under `ops/bench/results/ab/` (a revision's is kept and
reused; the working tree's is installed anew each run), or `current` (the `assern`
beside this Python, as it is: what the test suite's smoke run uses). Both builds serve
the same K stdio bench backends (each its own copies), configured as an `mcpServers`
file when a side has no settings (so every default applies) and as TOML otherwise. The
client is the official `mcp` client in its default mode (`--mode auto`: 2026-07-28 with
a server that speaks it; 0.1.0 did not, so there it falls back to the handshake) or
`--mode legacy` (the handshake with every build).

The calls alternate in small blocks, direct, A, B, with the order of A and B turning at
each round, so that whatever the machine does meanwhile hits all three alike. Printed per
build: the median and p99 of a sequential `echo` call, its overhead over the direct
median (in µs and as a share of the direct call), the aggregator's CPU per call, the
throughput with 32 calls in flight against direct, and the aggregator's own memory (RSS
after the load, and its peak). Last, the ratios B ÷ A: the figure to read, as both were
measured under the same conditions; absolute figures move with the machine. The call
median's ratio is given twice: of the two medians over the whole run, and "paired
blocks", the median over the run of B's block median ÷ A's block median run just
before or after it, which a load that changes during the run moves less.

With `--b-page` both builds run as shared instances (with their control sockets, as
`assern serve` runs by default) and B has its status page open for the whole run: one
tab's event stream (page_open.py), which the instance feeds every second.

With `--daemon` each side runs its own workstation daemon: `assern daemon` of that
build, in that side's `ASSERN_HOME`, started before the client and stopped (SIGTERM)
after it; the measured client's `assern serve` of the same build joins it as a user's
client does, and the call goes client → that session's `assern serve` (the shim: the
byte bridge of app/bridge.py in builds before the resuming one of app/handover.py) →
the daemon → the backend. The aggregator columns (CPU per call, RSS, peak) are then the
daemon's; one more table gives the shim's: its CPU per call over the same calls, its
RSS and PSS after the load, and its peak RSS (since its exec into the bridge).
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
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

# isort: split
import measure
import page_open
import peers
import procs
from builds import DAEMON_READY, DAEMON_WAIT, install, paired_ratio
from run import Changes, client_caller, direct_pool, listening_client
from wire import SpawnedServer

#: the 0.1.0 release, the build the hot path is held to
BASELINE = "3de4a78"
IN_FLIGHT = 32


@attrs.frozen
class Side:
    label: str
    rev: str  # a git revision, or "worktree"
    settings: str  # TOML lines for [settings], may be empty
    #: None: an isolated instance; False: shared, no page; True: shared, its page open
    page: bool | None = None
    #: served through a workstation daemon of its own build (`page` is then unused)
    daemon: bool = False


# ------------------------------------------------------------------- builds


def write_config(workdir: Path, side: Side, backends: Sequence[peers.Backend]) -> Path:
    if not side.settings:
        path = workdir / f"{side.label}.json"
        path.write_text(json.dumps(peers.mcp_servers(backends)))
        return path
    lines = ["[settings]", side.settings, ""]
    for b in backends:
        lines += [f"[servers.{b.name}]", f"command = {json.dumps(b.command)}", f"args = {json.dumps(b.args)}"]
        lines.append("")
    path = workdir / f"{side.label}.toml"
    path.write_text("\n".join(lines))
    return path


# ------------------------------------------------------------------ running


@attrs.define
class Running:
    side: Side
    server: SpawnedServer
    call: measure.Caller
    samples: list[float] = attrs.Factory(list)
    #: the median of each block of calls, in the order they ran
    block_medians: list[float] = attrs.Factory(list)
    cpu: float = 0.0
    calls_per_s: list[float] = attrs.Factory(list)
    #: the instance's own pid when it is not the spawned one (a shared one runs detached)
    instance_pid: int = 0
    page: page_open.PageSeen | None = None
    #: with a daemon: the spawned `assern serve`, a shim between the client and the daemon
    shim_pid: int = 0
    shim_cpu: float = 0.0

    @property
    def pid(self) -> int:
        return self.instance_pid or self.server.pid


@contextlib.asynccontextmanager
async def own_daemon(script: Path, env: dict[str, str], workdir: Path, label: str) -> AsyncIterator[int]:
    """`assern daemon` of this build in this side's `ASSERN_HOME`, listening; its pid.
    Stopped on exit with SIGTERM (as a service manager stops it), killed if it lingers."""
    log = workdir / f"{label}-daemon.stderr"
    with log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [str(script), "daemon"],
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        with trio.move_on_after(DAEMON_WAIT) as waited:
            while DAEMON_READY not in log.read_bytes():
                if process.poll() is not None:
                    raise SystemExit(
                        f"{label}: `assern daemon` exited ({process.returncode}): {log.read_text()}"
                    )
                await trio.sleep(0.05)
        if waited.cancelled_caught:
            raise SystemExit(
                f"{label}: `assern daemon` did not listen in {DAEMON_WAIT:g} s: {log.read_text()}"
            )
        yield process.pid
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(DAEMON_WAIT):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()


@contextlib.asynccontextmanager
async def serving(
    side: Side, script: Path, workdir: Path, backends: Sequence[peers.Backend], mode: str
) -> AsyncIterator[Running]:
    """`assern serve` of one build, connected, with every backend's tools visible (with a
    daemon: that build's daemon listening first, which the `assern serve` joins)."""
    config = write_config(workdir, side, backends)
    env = peers.base_env() | {"ASSERN_HOME": str(workdir / f"home-{side.label}")}
    if side.daemon:
        async with (
            own_daemon(script, env, workdir, side.label) as daemon_pid,
            _joined(side, script, workdir, config, env, backends, mode) as running,
        ):
            running.instance_pid, running.shim_pid = daemon_pid, running.server.pid
            yield running
        return
    if side.page is None:
        env["ASSERN_NO_INSTANCE_SHARING"] = "1"
    else:  # the page of this configuration's own shared instance, not the workstation daemon's
        env["ASSERN_NO_DAEMON"] = "1"
    async with _joined(side, script, workdir, config, env, backends, mode) as running:
        if side.page is None:
            yield running
            return
        assernctl = script.with_name("assernctl")
        running.instance_pid = await page_open.primary_pid(assernctl, config, env, workdir)
        if not side.page:
            yield running
            return
        async with page_open.page_open(assernctl, config, env, workdir) as running.page:
            yield running


@contextlib.asynccontextmanager
async def _joined(
    side: Side,
    script: Path,
    workdir: Path,
    config: Path,
    env: dict[str, str],
    backends: Sequence[peers.Backend],
    mode: str,
) -> AsyncIterator[Running]:
    """The client connected to `assern serve`, once every backend's tools are visible."""
    server = SpawnedServer(
        [str(script), "serve", "--config", str(config)],
        env=env,
        cwd=workdir,
        stderr=workdir / f"{side.label}.stderr",
        watch_every=None,
    )
    changes = Changes()
    async with listening_client(server.connect(), changes, mode) as client:

        async def names() -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

        found, when, _ = await measure.until_all_visible(
            names, [b.name for b in backends], ["echo"], changes.wait, 60 + 3 * len(backends)
        )
        if when is None:
            raise SystemExit(f"{side.label}: not every backend's tools visible in time")
        yield Running(side, server, client_caller(client, found))


async def block(call: measure.Caller, count: int, into: list[float] | None) -> None:
    for i in range(count):
        started = time.perf_counter()
        await call(0, "echo", {"text": f"ping {i}"})
        if into is not None:
            into.append(time.perf_counter() - started)


async def measure_all(
    direct: measure.Caller, runs: list[Running], spread: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Sequential calls in blocks (direct, A, B; A and B swapping each round), then
    throughput windows over `spread` backends in the same order."""
    direct_samples: list[float] = []
    for path in [direct, *(r.call for r in runs)]:
        await block(path, args.warmup, None)
    with measure.gc_held():
        # CPU over the whole phase: a build waiting for its turn uses none, and /proc's
        # 10 ms ticks would blur a figure read per block
        cpu_before = [procs.cpu_seconds(run.pid) for run in runs]
        shim_before = [procs.cpu_seconds(run.shim_pid) if run.shim_pid else 0.0 for run in runs]
        for round_ in range(args.rounds):
            order = runs if round_ % 2 == 0 else runs[::-1]
            for _ in range(max(1, args.calls // (args.rounds * args.block))):
                for run in order:
                    await block(direct, args.block, direct_samples)
                    await block(run.call, args.block, run.samples)
                    run.block_medians.append(statistics.median(run.samples[-args.block :]))
        for run, before, shim in zip(runs, cpu_before, shim_before, strict=True):
            run.cpu = procs.cpu_seconds(run.pid) - before
            if run.shim_pid:
                run.shim_cpu = procs.cpu_seconds(run.shim_pid) - shim
        direct_rates: list[float] = []
        for round_ in range(args.throughput_rounds):
            for run in runs if round_ % 2 == 0 else runs[::-1]:
                ok, _, seconds = await measure._pump(direct, spread, IN_FLIGHT, args.window)
                direct_rates.append(ok / seconds)
                ok, _, seconds = await measure._pump(run.call, spread, IN_FLIGHT, args.window)
                run.calls_per_s.append(ok / seconds)
    direct_median = statistics.median(direct_samples)
    direct_rate = statistics.fmean(direct_rates) if direct_rates else None
    out: dict[str, Any] = {
        "direct": measure.summary_ms(direct_samples),
        "direct_calls_per_s": direct_rate,
        "throughput_backends": spread,
        "builds": {},
    }
    for run in runs:
        figures = measure.summary_ms(run.samples)
        overhead_s = statistics.median(run.samples) - direct_median
        rate = statistics.fmean(run.calls_per_s) if run.calls_per_s else None
        out["builds"][run.side.label] = {
            "rev": run.side.rev,
            "settings": run.side.settings,
            **figures,
            "overhead_us": overhead_s * 1e6,
            "overhead_share": overhead_s / direct_median,
            "cpu_per_call_us": run.cpu / len(run.samples) * 1e6,
            "throughput_ratio": rate / direct_rate if rate and direct_rate else None,
            "rss_mb": procs.rss_kb(run.pid) / 1024,
            "rss_peak_mb": procs.peak_rss_kb(run.pid) / 1024,
            "page_events": run.page.events if run.page is not None else None,
            "shim": shim_figures(run),
        }
    if len(runs) == 2:
        out["paired_median_ratio"] = paired_ratio(runs[0].block_medians, runs[1].block_medians)
    return out


async def ab(sides: list[Side], scripts: list[Path], args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="assern-ab-run-"))
    backends = peers.bench_backends(args.backends, args.tools)
    #: the throughput's calls go to this many backends, on every path
    spread = min(len(backends), 5)
    try:
        direct_backends = peers.bench_backends(spread, args.tools, prefix="d")
        async with (
            direct_pool(direct_backends, workdir, args.mode) as direct,
            contextlib.AsyncExitStack() as stack,
        ):
            runs = [
                await stack.enter_async_context(serving(side, script, workdir, backends, args.mode))
                for side, script in zip(sides, scripts, strict=True)
            ]
            await procs.wait_quiet(5.0)
            return await measure_all(direct, runs, spread, args)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def bridge_file(arg: str) -> str | None:
    """The bridge a shim's argument names: a script run as a file (`.../handover.py`, as
    older builds ran it) or a module launched (`assern.app.handover`): `handover.py`."""
    if arg.endswith(".py"):
        return Path(arg).name
    if arg.startswith("assern.app."):
        return arg.rpartition(".")[2] + ".py"
    return None


def shim_figures(run: Running) -> dict[str, Any] | None:
    """The shim's own figures (None without a daemon): its CPU per sequential call, and
    its memory after the load."""
    if not run.shim_pid:
        return None
    script = next(filter(None, map(bridge_file, procs.cmdline(run.shim_pid))), None)
    return {
        "program": script or "assern",  # the bridge it became: bridge.py (bytes) or handover.py
        "cpu_per_call_us": run.shim_cpu / len(run.samples) * 1e6,
        "rss_mb": procs.rss_kb(run.shim_pid) / 1024,
        "pss_mb": procs.pss_kb(run.shim_pid) / 1024,
        "rss_peak_mb": procs.peak_rss_kb(run.shim_pid) / 1024,
    }


# ------------------------------------------------------------------- report


def report(out: dict[str, Any]) -> str:
    direct = out["direct"]
    rows = [
        f"client mode {out['mode']}, K = {out['backends']} backends x {out['tools']} tools",
        f"direct call: median {direct['median_ms']:.3f} ms, p99 {direct['p99_ms']:.3f} ms "
        f"({direct['n']} calls)",
    ]
    machine = out["machine"]
    rows.append(f"{machine['cpus']} CPUs, load average {machine['loadavg']} (1, 5, 15 min) at the run's end")
    if out["daemon"]:
        rows.append("each build through its own workstation daemon: CPU/call, RSS and peak are the daemon's")
    header = (
        f"{'build':<10} {'median':>9} {'p99':>9} {'overhead':>10} {'share':>7} {'CPU/call':>10} {'thru':>6} "
        f"{'RSS':>8} {'peak':>8}"
    )
    rows += [header, "-" * len(header)]
    for label, b in out["builds"].items():
        thru = f"{b['throughput_ratio']:.2f}" if b["throughput_ratio"] else "n/a"
        rows.append(
            f"{label:<10} {b['median_ms']:>7.3f}ms {b['p99_ms']:>7.3f}ms {b['overhead_us']:>8.0f}µs "
            f"{b['overhead_share']:>7.3f} {b['cpu_per_call_us']:>8.0f}µs {thru:>6} "
            f"{b['rss_mb']:>6.1f}MB {b['rss_peak_mb']:>6.1f}MB"
        )
    for label, b in out["builds"].items():
        rows.append(f"  {label} = {b['rev']}" + (f" with settings: {b['settings']}" if b["settings"] else ""))
        if b["page_events"] is not None:
            rows.append(f"  {label} had its status page open: {b['page_events']} page updates received")
    shims = {label: b["shim"] for label, b in out["builds"].items() if b["shim"] is not None}
    if shims:
        header = f"{'shim':<10} {'runs':>12} {'shim CPU/call':>14} {'shim RSS':>9} {'shim PSS':>9}"
        header += f" {'shim peak':>10}"
        rows += ["the shim: the `assern serve` between the client and its daemon", header, "-" * len(header)]
        for label, shim in shims.items():
            rows.append(
                f"{label:<10} {shim['program']:>12} {shim['cpu_per_call_us']:>12.0f}µs "
                f"{shim['rss_mb']:>7.1f}MB {shim['pss_mb']:>7.1f}MB {shim['rss_peak_mb']:>8.1f}MB"
            )
    if len(out["builds"]) == 2:
        a, b = out["builds"].values()
        ratio = b["overhead_us"] / a["overhead_us"] if a["overhead_us"] > 0 else float("nan")
        cpu = b["cpu_per_call_us"] / a["cpu_per_call_us"] if a["cpu_per_call_us"] else float("nan")
        rows.append(
            f"B ÷ A: overhead {ratio:.2f}, median {b['median_ms'] / a['median_ms']:.3f} "
            f"(paired blocks {out['paired_median_ratio']:.3f}), "
            f"p99 {b['p99_ms'] / a['p99_ms']:.3f}, CPU per call {cpu:.2f}, "
            f"RSS {b['rss_mb'] / a['rss_mb']:.2f}"
        )
        if a["shim"] is not None and b["shim"] is not None:
            sa, sb = a["shim"], b["shim"]
            shim_cpu = (
                sb["cpu_per_call_us"] / sa["cpu_per_call_us"] if sa["cpu_per_call_us"] else float("nan")
            )
            rows.append(
                f"B ÷ A, the shim: CPU per call {shim_cpu:.2f}, PSS {sb['pss_mb'] / sa['pss_mb']:.2f} "
                f"({sb['pss_mb'] - sa['pss_mb']:+.1f} MB)"
            )
        rows.append(
            f"B − A: overhead {b['overhead_us'] - a['overhead_us']:+.0f} µs, "
            f"RSS {b['rss_mb'] - a['rss_mb']:+.1f} MB"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--a", default=BASELINE, help=f"build A: a git revision or 'worktree' (default {BASELINE}, 0.1.0)"
    )
    parser.add_argument("--b", default="worktree", help="build B (default: the working tree)")
    parser.add_argument("--a-settings", default="", help="TOML lines for build A's [settings]")
    parser.add_argument("--b-settings", default="", help="TOML lines for build B's [settings]")
    parser.add_argument(
        "--mode",
        default="auto",
        help="the client's protocol mode: auto (what a client does by default: 2026-07-28 where the server "
        "speaks it) or legacy (the initialize handshake); default auto",
    )
    parser.add_argument("--backends", type=int, default=5, help="K stdio bench backends (default 5)")
    parser.add_argument("--tools", type=int, default=10, help="tools per backend (default 10)")
    parser.add_argument("--calls", type=int, default=600, help="sequential calls per build (default 600)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds; A and B swap places each round")
    parser.add_argument("--block", type=int, default=25, help="calls per block (default 25)")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--window", type=float, default=1.0, help="seconds per throughput window")
    parser.add_argument("--throughput-rounds", type=int, default=2)
    parser.add_argument(
        "--b-page",
        action="store_true",
        help="both run as shared instances; B with its status page open (an event stream) all along",
    )
    parser.add_argument(
        "--daemon",
        action="store_true",
        help="each build runs its own workstation daemon (`assern daemon`, its own ASSERN_HOME), which "
        "the measured client's `assern serve` joins; the shim's CPU and memory are printed too",
    )
    parser.add_argument("--json", type=Path, help="also write every figure as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (configs, stderr, logs)")
    parser.add_argument("--smoke", action="store_true", help="K = 1, a few calls (the test suite's run)")
    args = parser.parse_args(argv)
    if args.daemon and args.b_page:
        parser.error("--daemon and --b-page: the page is a shared instance's; choose one")
    if args.smoke:
        args.backends, args.calls, args.rounds, args.block, args.warmup = 1, 20, 2, 5, 5
        args.window, args.throughput_rounds = 0.2, 1
    shared = False if args.b_page else None
    sides = [
        Side("A", args.a, args.a_settings, shared, args.daemon),
        Side("B", args.b, args.b_settings, True if args.b_page else None, args.daemon),
    ]
    scripts = [install(s.rev) for s in sides]
    out = trio.run(ab, sides, scripts, args)
    out["machine"] = {"cpus": os.cpu_count(), "loadavg": procs.loadavg(), "python": sys.version.split()[0]}
    out["backends"], out["tools"], out["mode"] = args.backends, args.tools, args.mode
    out["daemon"] = args.daemon
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
