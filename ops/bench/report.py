"""The printed report: one table per backend count, one row per measure, and the targets.

Columns are the aggregators, then `direct` where a measure has a direct counterpart.
A direct figure is measured in alternation with each aggregator, so the direct column
shows the range over those pairs; every ratio uses its own aggregator's pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

LABEL = 44
COLUMN = 13

Getter = Callable[[Mapping[str, Any]], Any]


class Missing(Exception):
    """The figure is not in this result (not measured, or its step failed)."""


def dig(result: Mapping[str, Any], *path: str) -> Any:
    node: Any = result
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            raise Missing(".".join(path))
        node = node[key]
        if isinstance(node, Mapping) and "error" in node:
            raise Missing(f"{key}: {node['error']}")
    return node


def number(value: Any, digits: int) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}" if digits else f"{value:,.0f}"


def fig(*path: str, digits: int = 2, scale: float = 1.0) -> Getter:
    def get(result: Mapping[str, Any]) -> str:
        value = dig(result, *path)
        return number(None if value is None else value * scale, digits)

    return get


def crash_recovery(result: Mapping[str, Any]) -> str:
    crash = dig(result, "crash")
    if crash.get("recovered_s") is None:
        return f"never ≤{crash['bound_s']:g}s"
    return f"{crash['recovered_s']:.2f}"


def crash_in_flight(result: Mapping[str, Any]) -> str:
    return str(dig(result, "crash", "in_flight")).split(":")[0]


def crash_others(result: Mapping[str, Any]) -> str:
    others = dig(result, "crash", "other_backend_calls")
    if others is None:
        return "n/a (K=1)"
    return f"{others['failed']}/{others['ok'] + others['failed']}"


def later_call(result: Mapping[str, Any]) -> str:
    later = dig(result, "later_call")
    if later.get("answered_ms") is None:
        return f"never ≤{later['bound_s']:g}s"
    failed = later.get("failed_calls", 0)
    return f"{later['answered_ms']:.1f}" + (f", {failed} failed" if failed else "")


def sharing(key: str, digits: int = 3) -> Getter:
    def get(result: Mapping[str, Any]) -> str:
        share = dig(result, "sharing")
        status = str(share.get("status", ""))
        if status == "ok":
            return f"{share[key]:.{digits}f}"
        return "not measured" if status.startswith("not measured") else "n/a"

    return get


#: (label, figure of an aggregator, figure of the direct path or None)
ROWS: Sequence[tuple[str, Getter, Getter | None]] = (
    ("initialize answered after spawn (s)", fig("initialize_s", digits=3), None),
    ("all backends' tools visible (s)", fig("all_visible_s", digits=3), None),
    ("aggregator CPU until then (s)", fig("cpu_until_visible_s", digits=2), None),
    ("tools/list median (ms)", fig("list", "median_ms", digits=3), fig("list_direct", "median_ms", digits=3)),
    ("tools/list p99 (ms)", fig("list", "p99_ms", digits=3), fig("list_direct", "p99_ms", digits=3)),
    (
        "tools/list, first byte back (ms)",
        fig("list_first_byte", "median_ms", digits=3),
        fig("list_direct", "first_byte", "median_ms", digits=3),
    ),
    (
        "tools/list, bare client, first byte (ms)",
        fig("list_probe", "k", "first_byte", "median_ms", digits=3),
        None,
    ),
    (
        "  the same tools from 1 backend (ms)",
        fig("list_probe", "one", "first_byte", "median_ms", digits=3),
        None,
    ),
    (
        "tools/list, bare client, whole answer (ms)",
        fig("list_probe", "k", "whole_line", "median_ms", digits=3),
        None,
    ),
    ("tools/list result (bytes)", fig("list_bytes", digits=0), None),
    ("tools/list, client's own parse (ms)", fig("list_client_parse", "median_ms", digits=3), None),
    (
        "call median (ms)",
        fig("call", "through", "median_ms", digits=3),
        fig("call", "direct", "median_ms", digits=3),
    ),
    ("call p99 (ms)", fig("call", "through", "p99_ms", digits=3), fig("call", "direct", "p99_ms", digits=3)),
    ("call ratio, median (x direct)", fig("call", "ratio_median"), None),
    ("call ratio, p99 (x direct)", fig("call", "ratio_p99"), None),
    ("call overhead, median (us)", fig("call", "overhead_median_us", digits=0), None),
    ("call overhead, p99 (us)", fig("call", "overhead_p99_us", digits=0), None),
    ("aggregator CPU per call, sequential (us)", fig("call", "aggregator_cpu_per_call_us", digits=0), None),
    (
        "throughput, 32 in flight (calls/s)",
        fig("throughput", "through", "calls_per_s", digits=0),
        fig("throughput", "direct", "calls_per_s", digits=0),
    ),
    ("throughput ratio (x direct)", fig("throughput", "ratio"), None),
    (
        "aggregator CPU per call, 32 in flight (us)",
        fig("throughput", "aggregator_cpu_per_call_us", digits=0),
        None,
    ),
    ("RSS peak, aggregator process (MB)", fig("rss", "aggregator_peak_mb", digits=1), None),
    ("RSS peak, whole tree (MB)", fig("rss", "tree_peak_mb", digits=1), None),
    ("crash: the in-flight call", crash_in_flight, None),
    ("crash: failed calls to it", fig("crash", "failed_calls", digits=0), None),
    ("crash: answers again after (s)", crash_recovery, None),
    ("crash: other backend, failed/all", crash_others, None),
    ("crash: a call 2 s after a 2nd kill (ms)", later_call, None),
    ("processes left 2 s after stop", fig("leftover_processes", digits=0), None),
    ("sharing: 2nd serve initialize (s)", sharing("initialize_s"), None),
    ("sharing: 2nd serve tools/list (s)", sharing("tools_list_s"), None),
    ("sharing: 2nd serve RSS peak (MB)", sharing("second_rss_mb", 1), None),
)


def cell(getter: Getter, result: Mapping[str, Any], notes: list[str], where: str) -> str:
    try:
        return str(getter(result))
    except Missing as missing:
        text = str(missing)
        if ": " in text:
            notes.append(f"{where}: {text}")
            return "error"
        return "n/a"


def direct_cell(getter: Getter, results: Sequence[Mapping[str, Any]]) -> str:
    values = []
    for result in results:
        try:
            values.append(getter(result))
        except Missing:
            continue
    if not values:
        return ""
    low, high = min(values, key=_sort_key), max(values, key=_sort_key)
    return low if low == high else f"{low}–{high}"


def _sort_key(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return math.inf


def _column(text: str) -> str:
    """One cell, right-aligned; a cell wider than its column (a wide direct range) still
    keeps two spaces from its neighbour."""
    return "  " + text.rjust(COLUMN - 2)


def scenario_table(scenario: Mapping[str, Any], names: Sequence[str], notes: list[str]) -> list[str]:
    results = scenario["results"]
    header = f"{scenario['label']}".ljust(LABEL) + "".join(_column(n) for n in [*names, "direct"])
    lines = [
        header,
        "-" * len(header),
    ]
    statuses = [str(results.get(n, {}).get("status", "not run")) for n in names]
    if any(status != "ok" for status in statuses):
        lines.append(
            "status".ljust(LABEL) + "".join(_column("ok" if s == "ok" else "see note") for s in statuses)
        )
        notes.extend(
            f"{scenario['label']}, {n}: {s}" for n, s in zip(names, statuses, strict=True) if s != "ok"
        )
    for label, getter, direct in ROWS:
        cells = [
            cell(getter, results[n], notes, f"{scenario['label']}, {n}, {label}")
            if n in results
            else "not run"
            for n in names
        ]
        if all(c in ("n/a", "not run") for c in cells):
            continue
        direct_text = direct_cell(direct, [results[n] for n in names if n in results]) if direct else ""
        lines.append(label.ljust(LABEL) + "".join(_column(c) for c in [*cells, direct_text]))
    order = ""
    if scenario.get("order"):
        waits = [results.get(n, {}).get("quiet_wait_s") for n in scenario["order"]]
        waited = max((w for w in waits if isinstance(w, int | float)), default=0.0)
        names_in_order = ", ".join(scenario["order"])
        order = f"; run in the order {names_in_order}, each after ≤ {waited:.1f} s for idle CPUs"
    lines.append(
        f"(load average {scenario['loadavg_before']} before, {scenario['loadavg_after']} after; "
        f"{scenario['seconds']:.0f} s{order})"
    )
    return lines


# --------------------------------------------------------------------- targets


def _assern(scenario: Mapping[str, Any]) -> Mapping[str, Any]:
    return scenario["results"].get("assern", {})


def _scenario(run: Mapping[str, Any], backends: int, tools: int) -> Mapping[str, Any] | None:
    return next(
        (s for s in run["scenarios"] if s["backends"] == backends and s["tools_per_backend"] == tools), None
    )


def _safe(getter: Callable[[], Any]) -> Any:
    try:
        return getter()
    except (Missing, KeyError, TypeError):
        return None


def targets(run: Mapping[str, Any]) -> list[tuple[str, str, bool | None]]:
    """assern's performance targets: (target, measured, met), None when not measured."""
    out: list[tuple[str, str, bool | None]] = []
    main = _scenario(run, 20, 10)
    scenarios = [s for s in run["scenarios"] if "assern" in s["results"]]
    if main is not None and "assern" in main["results"]:
        a = _assern(main)
        med = _safe(lambda: dig(a, "call", "overhead_median_us"))
        p99 = _safe(lambda: dig(a, "call", "overhead_p99_us"))
        ratio = _safe(lambda: dig(a, "throughput", "ratio"))
        listed = _safe(lambda: dig(a, "list", "median_ms"))
        out.append(
            (
                "call overhead ≤ 500 us median at K=20",
                number(med, 0) + " us",
                None if med is None else med <= 500,
            )
        )
        out.append(
            (
                "call overhead ≤ 2000 us p99 at K=20",
                number(p99, 0) + " us",
                None if p99 is None else p99 <= 2000,
            )
        )
        out.append(
            (
                "throughput ≥ 0.8x direct at K=20",
                number(ratio, 2) + "x",
                None if ratio is None else ratio >= 0.8,
            )
        )
        # The official client's list time includes its own reading of the whole list
        # (about as long as the direct list of the same tools); the aggregator's part is
        # the whole answer on the wire, which the bare client times.
        served = _safe(lambda: dig(a, "list_probe", "k", "whole_line", "median_ms"))
        direct_list = _safe(lambda: dig(a, "list_direct", "median_ms"))
        out.append(
            (
                "tools/list ≤ 2 ms median at K=20 (the whole answer, bare client)",
                f"{number(served, 3)} ms; through the official client {number(listed, 3)} ms, "
                f"the same tools from 1 server through it {number(direct_list, 3)} ms",
                None if served is None else served <= 2,
            )
        )
    # The list grows with K, and so does the time to carry it and what the client spends
    # reading it, whoever serves it: flat in K holds the list fixed and varies K (the bare
    # client of list_probe.py: K backends against one backend with all their tools).
    flat = []
    for s in scenarios:
        many = _safe(lambda s=s: dig(_assern(s), "list_probe", "k", "first_byte", "median_ms"))
        one = _safe(lambda s=s: dig(_assern(s), "list_probe", "one", "first_byte", "median_ms"))
        if many is not None and one is not None and one > 0:
            flat.append((s["label"], many, one))
    if flat:
        text = ", ".join(f"{label}: {many:.3f} vs {one:.3f}" for label, many, one in flat)
        out.append(
            (
                "tools/list flat in K (first byte, K backends ≤ 1.5x 1 backend of the same tools)",
                text + " ms",
                all(many <= 1.5 * one for _, many, one in flat),
            )
        )
    inits = [_safe(lambda s=s: dig(_assern(s), "initialize_s")) for s in scenarios]
    inits = [v for v in inits if v is not None]
    if inits:
        out.append(("initialize ≤ 0.3 s after spawn, any K", f"max {max(inits):.3f} s", max(inits) <= 0.3))
    for s in scenarios:
        mine = _safe(lambda s=s: dig(_assern(s), "all_visible_s"))
        theirs = [
            v
            for n in ("fastmcp", "magg")
            if n in s["results"]
            and (v := _safe(lambda n=n, s=s: dig(s["results"][n], "all_visible_s"))) is not None
        ]
        if mine is not None and theirs:
            out.append(
                (
                    f"all visible no later than best peer, {s['label']}",
                    f"{mine:.2f} s vs {min(theirs):.2f} s",
                    mine <= min(theirs),
                )
            )
    rss = [_safe(lambda s=s: dig(_assern(s), "rss", "aggregator_peak_mb")) for s in scenarios]
    rss = [v for v in rss if v is not None]
    if rss:
        out.append(("aggregator RSS ≤ 60 MB", f"max {max(rss):.1f} MB", max(rss) <= 60))
    for s in scenarios:
        compared, behind = behind_peers(s)
        if compared:
            out.append(
                (
                    f"better than every peer on every line, {s['label']}",
                    f"{compared - len(behind)} of {compared} comparisons"
                    + (f"; behind on {'; '.join(behind)}" if behind else ""),
                    not behind,
                )
            )
    for s in scenarios:
        crash = _safe(lambda s=s: dig(_assern(s), "crash"))
        if crash is None:
            continue
        others = crash.get("other_backend_calls") or {"failed": 0}
        met = crash["failed_calls"] <= 1 and crash["recovered_s"] is not None and others["failed"] == 0
        back = "never" if crash["recovered_s"] is None else f"{crash['recovered_s']:.2f} s"
        out.append(
            (
                f"killed backend costs ≤ the in-flight call, {s['label']}",
                f"{crash['failed_calls']} failed, back after {back}, others failed {others['failed']}",
                met,
            )
        )
    return out


#: The figures where one aggregator can be better than another: (label, path, direction).
#: "lower" and "higher" must be strictly better; "lower-or-equal" is for counts whose best
#: is a floor both can reach (one failed call, the in-flight one; no process left).
COMPARED: Sequence[tuple[str, tuple[str, ...], str]] = (
    ("initialize", ("initialize_s",), "lower"),
    ("all visible", ("all_visible_s",), "lower"),
    ("CPU until visible", ("cpu_until_visible_s",), "lower"),
    ("tools/list median", ("list", "median_ms"), "lower"),
    ("tools/list p99", ("list", "p99_ms"), "lower"),
    ("tools/list first byte", ("list_first_byte", "median_ms"), "lower"),
    ("tools/list bytes", ("list_bytes",), "lower"),
    ("tools/list client parse", ("list_client_parse", "median_ms"), "lower"),
    ("call median", ("call", "through", "median_ms"), "lower"),
    ("call p99", ("call", "through", "p99_ms"), "lower"),
    ("call ratio median", ("call", "ratio_median"), "lower"),
    ("call ratio p99", ("call", "ratio_p99"), "lower"),
    ("call overhead median", ("call", "overhead_median_us"), "lower"),
    ("call overhead p99", ("call", "overhead_p99_us"), "lower"),
    ("CPU per call, sequential", ("call", "aggregator_cpu_per_call_us"), "lower"),
    ("throughput", ("throughput", "through", "calls_per_s"), "higher"),
    ("throughput ratio", ("throughput", "ratio"), "higher"),
    ("CPU per call, 32 in flight", ("throughput", "aggregator_cpu_per_call_us"), "lower"),
    ("RSS aggregator", ("rss", "aggregator_peak_mb"), "lower"),
    ("RSS whole tree", ("rss", "tree_peak_mb"), "lower"),
    ("crash failed calls", ("crash", "failed_calls"), "lower-or-equal"),
    ("crash answers again after", ("crash", "recovered_s"), "lower"),
    ("crash other backend failed", ("crash", "other_backend_calls", "failed"), "lower-or-equal"),
    ("a call 2 s after a kill", ("later_call", "answered_ms"), "lower"),
    ("a call 2 s after a kill, failed", ("later_call", "failed_calls"), "lower-or-equal"),
    ("processes left", ("leftover_processes",), "lower-or-equal"),
)

PEERS = ("fastmcp", "magg")


def _comparable(result: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    """The figure as a number to compare; a crash never recovered is infinitely late."""
    try:
        value = dig(result, *path)
    except Missing:
        return None
    if value is None and path in (("crash", "recovered_s"), ("later_call", "answered_ms")):
        return math.inf
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return None
    return float(value)


def behind_peers(scenario: Mapping[str, Any]) -> tuple[int, list[str]]:
    """assern against every peer on every compared line of one size.

    Returns the number of (line, peer) pairs compared and, for each where assern is not
    better, "LINE: assern A vs PEER P".
    """
    results = scenario["results"]
    mine = results.get("assern")
    compared, behind = 0, []
    if not isinstance(mine, Mapping):
        return compared, behind
    for label, path, direction in COMPARED:
        a = _comparable(mine, path)
        if a is None:
            continue
        for peer in PEERS:
            theirs = results.get(peer)
            p = _comparable(theirs, path) if isinstance(theirs, Mapping) else None
            if p is None:
                continue
            compared += 1
            better = {"lower": a < p, "higher": a > p, "lower-or-equal": a <= p}[direction]
            if not better:
                behind.append(f"{label}: assern {a:.4g} vs {peer} {p:.4g}")
    return compared, behind


def render(run: Mapping[str, Any]) -> str:
    meta = run["meta"]
    names = list(run["aggregators"])
    lines = [
        f"assern benchmark, {meta['started']}: {meta['machine']}, Python {meta['python']}, mcp {meta['mcp']}",
        f"load average {meta['loadavg_before']} at the start, {meta['loadavg_after']} at the end; "
        f"{meta['seconds']:.0f} s in all",
        "",
        "aggregators:",
        *(f"  {name}: {status}" for name, status in run["peers"].items()),
        "cuts:",
        *(f"  {cut}" for cut in meta["cuts"]),
    ]
    notes: list[str] = []
    for scenario in run["scenarios"]:
        lines += ["", *scenario_table(scenario, names, notes)]
    checks = targets(run)
    if checks:
        lines += ["", "performance targets for assern:"]
        for target, measured, met in checks:
            verdict = "not measured" if met is None else ("met" if met else "MISSED")
            lines.append(f"  {verdict:<12} {target}: {measured}")
    if notes:
        lines += ["", "notes:", *(f"  {note}" for note in notes)]
    return "\n".join(lines)
