"""Repeated kill -9 trials: how soon each aggregator answers again, over many fresh starts.

    python ops/bench/crash_trials.py                   # K=5, 6 trials each, all aggregators
    python ops/bench/crash_trials.py --backends 20 --trials 4 --only assern --only fastmcp

The main run (run.py) kills one backend once per size: a single sample, and the time to
answer again is mostly the backend's own start-up (about 0.6 s for a Python SDK server on
this kind of machine), which every aggregator waits for. Here each trial starts the
aggregator afresh with K bench backends, waits until every tool is visible and the CPUs
are idle, then takes the same crash measure as run.py (measure.crash). The aggregators
take turns, the order turning by one each round, so that all see the same noise.

A fresh start per trial on purpose: killing the same backend again within one session
would meet assern's restart policy, which holds off a backend that fails again within
`restart_window` (a crash loop), while a peer that re-spawns on the next call does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from mcp import Client

# isort: split
# ops/bench is this script's directory, so its modules import by their plain names.
import measure
import peers
import procs
from run import BASES, backend_killer, client_caller, set_up_peers
from wire import SpawnedServer

#: seconds a killed backend gets to answer again
BOUND = 5.0
#: at most this long, before each kill, for the CPUs to be idle (procs.wait_quiet)
QUIET_LIMIT = 5.0


async def trial(
    agg: peers.Aggregator, backends: int, workdir: Path, quiet: float = QUIET_LIMIT
) -> dict[str, Any]:
    """One fresh start of `agg` over `backends` bench backends, then one crash (after at
    most `quiet` seconds of waiting for idle CPUs)."""
    listed = peers.bench_backends(backends, 10)
    config = workdir / "backends.json"
    config.write_text(json.dumps(peers.mcp_servers(listed), indent=2))
    launch = agg.launch(workdir, config, listed)
    server = SpawnedServer(launch.argv, env=launch.env, cwd=workdir, stderr=workdir / f"{agg.name}.stderr")
    names = [b.name for b in listed]
    async with Client(server.connect(), mode="legacy", cache=None) as client:

        async def list_names() -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

        found, when, _ = await measure.until_all_visible(list_names, names, BASES, trio.sleep_forever, 60.0)
        if when is None:
            return {"error": f"only {len(found)} of {len(names) * len(BASES)} tools visible"}
        await procs.wait_quiet(quiet)
        with measure.gc_held():
            return await measure.crash(
                client_caller(client, found), backends, backend_killer(server.pid, names[-1]), BOUND
            )


def summary(trials: Sequence[dict[str, Any]]) -> str:
    back = [t["recovered_s"] for t in trials if t.get("recovered_s") is not None]
    failed = sum(t.get("failed_calls", 0) for t in trials)
    never = len(trials) - len(back)
    if not back:
        return f"never back within {BOUND:g} s in {len(trials)} trials"
    return (
        f"answers again after median {statistics.median(back):.3f} s "
        f"(min {min(back):.3f}, max {max(back):.3f}, n {len(back)}); "
        f"failed calls {failed} in all" + (f"; never back in {never}" if never else "")
    )


async def run_trials(
    names: Sequence[str], backends: int, count: int, quiet: float = QUIET_LIMIT
) -> dict[str, list[dict[str, Any]]]:
    aggregators = [agg for agg in peers.PROCESS_AGGREGATORS if agg.name in names]
    _, usable = set_up_peers(names)
    aggregators = [agg for agg in aggregators if agg.peer is None or usable.get(agg.name)]
    results: dict[str, list[dict[str, Any]]] = {agg.name: [] for agg in aggregators}
    for round_ in range(count):
        turn = round_ % len(aggregators)
        for agg in aggregators[turn:] + aggregators[:turn]:
            with tempfile.TemporaryDirectory(prefix="assern-crash-") as folder:
                try:
                    out = await trial(agg, backends, Path(folder), quiet)
                except Exception as exc:
                    out = {"error": measure.short_error(exc)}
            results[agg.name].append(out)
            back = out.get("recovered_s")
            shown = out.get("error") or (f"{back:.3f} s" if back is not None else "never")
            print(f"  round {round_ + 1}: {agg.name}: {shown}", file=sys.stderr, flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", type=int, default=5, help="K bench backends (10 tools each)")
    parser.add_argument("--trials", type=int, default=6, help="fresh starts per aggregator")
    parser.add_argument(
        "--only", action="append", choices=[a.name for a in peers.PROCESS_AGGREGATORS], help="repeatable"
    )
    parser.add_argument("--json", type=Path, help="also write every trial as JSON")
    parser.add_argument(
        "--quiet",
        type=float,
        default=QUIET_LIMIT,
        help=f"seconds a trial waits at most for idle CPUs before the kill (default {QUIET_LIMIT:g})",
    )
    args = parser.parse_args(argv)
    names = args.only or [a.name for a in peers.PROCESS_AGGREGATORS]
    results = trio.run(run_trials, names, args.backends, args.trials, args.quiet)
    print(f"kill -9 of one of {args.backends} backends, {args.trials} fresh starts each:")
    for name, trials in results.items():
        print(f"  {name:<8} {summary(trials)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
