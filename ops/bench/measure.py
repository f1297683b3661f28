"""The measurements, written against a `Caller`: whatever routes a call to backend i.

A `Caller` hides how a path names a backend's tool (`b01_echo` through an aggregator,
`echo` on a direct connection, a ClientSessionGroup's hook names), so one function
measures every path the same way. A caller raises `CallFailed` (or the client's own
error) when the call did not succeed.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import attrs
import mcp_types as types
import trio

#: call(backend_index, base_tool_name, arguments); raises when the call failed
Caller = Callable[[int, str, dict[str, Any]], Awaitable[None]]
ListTools = Callable[[], Awaitable[Sequence[str]]]
#: CPU seconds used so far by the aggregator process (None: not a process of its own)
CpuClock = Callable[[], float]


class CpuMeter:
    """Adds up an aggregator's CPU time over the spans measured with it."""

    def __init__(self, clock: CpuClock | None) -> None:
        self.clock = clock
        self.seconds = 0.0

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        before = self.clock() if self.clock else 0.0
        try:
            yield
        finally:
            if self.clock:
                self.seconds += self.clock() - before

    def per_call_us(self, calls: int) -> float | None:
        return self.seconds / calls * 1e6 if self.clock and calls else None


@contextlib.contextmanager
def gc_held() -> Iterator[None]:
    """Collect now, then keep Python's cyclic GC out of the span (as `timeit` does).

    The harness holds every client's sessions and parsed lists: a generation-2 pass over
    that heap takes 30-50 ms and lands on whichever sample it happens to interrupt (it
    was every tools/list p99 outlier, through an aggregator and direct alike). Reference
    counting still frees everything acyclic meanwhile.
    """
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class CallFailed(Exception):
    """A tool call came back with isError, or not at all."""


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(samples: Sequence[float]) -> dict[str, float]:
    """Median, p99 and mean in milliseconds of durations in seconds."""
    if not samples:
        return {"median_ms": float("nan"), "p99_ms": float("nan"), "mean_ms": float("nan"), "n": 0}
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p99_ms": percentile(samples, 0.99) * 1000,
        "mean_ms": statistics.fmean(samples) * 1000,
        "n": len(samples),
    }


def short_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:160]


# ------------------------------------------------------------------ cold start


def exposed_names(
    tool_names: Sequence[str], backends: Sequence[str], bases: Sequence[str]
) -> dict[tuple[int, str], str]:
    """Map (i, base) to the exposed name of backend i's tool `base`, where listed.

    Aggregators prefix differently; a name counts as backend b's `base` when it is
    `b`, a separator of at most three non-alphanumeric characters, then `base`.
    """
    found: dict[tuple[int, str], str] = {}
    listed = set(tool_names)
    for i, backend in enumerate(backends):
        for base in bases:
            for name in listed:
                middle = name[len(backend) : len(name) - len(base)]
                if (
                    name.startswith(backend)
                    and name.endswith(base)
                    and 0 < len(middle) <= 3
                    and not middle.isalnum()
                ):
                    found[i, base] = name
                    break
    return found


async def until_all_visible(
    list_tools: ListTools,
    backends: Sequence[str],
    bases: Sequence[str],
    changed: Callable[[], Awaitable[None]],
    limit: float,
) -> tuple[dict[tuple[int, str], str], float | None, int]:
    """List tools until every backend's `bases` are visible (or `limit` s passed).

    Between two lists, waits for a list_changed notification or 50 ms, whichever comes
    first. Returns (names, when all were visible as perf_counter, lists made).
    """
    names: dict[tuple[int, str], str] = {}
    lists = 0
    with trio.move_on_after(limit):
        while True:
            names = exposed_names(await list_tools(), backends, bases)
            lists += 1
            if len(names) == len(backends) * len(bases):
                return names, time.perf_counter(), lists
            with trio.move_on_after(0.05):
                await changed()
    return names, None, lists


# ------------------------------------------------------------------ tools/list


async def list_latency(list_tools: ListTools, count: int, budget: float) -> dict[str, float]:
    """`count` lists in a row, or fewer (at least 10) once `budget` s are spent."""
    samples: list[float] = []
    began = time.perf_counter()
    for _ in range(count):
        if len(samples) >= 10 and time.perf_counter() - began > budget:
            break
        started = time.perf_counter()
        await list_tools()
        samples.append(time.perf_counter() - started)
    return summary_ms(samples)


def client_parse(line: bytes, count: int = 20) -> dict[str, float]:
    """What the client itself spends on one `tools/list` response line: JSON-RPC
    parsing and the `ListToolsResult` model, as the SDK client does (median of `count`)."""
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        assert isinstance(message, types.JSONRPCResponse)
        types.ListToolsResult.model_validate(message.result, by_name=False)
        samples.append(time.perf_counter() - started)
    return summary_ms(samples)


# ------------------------------------------------------------------- per call


async def _timed_block(call: Caller, count: int, into: list[float]) -> None:
    for i in range(count):
        started = time.perf_counter()
        await call(0, "echo", {"text": f"ping {i}"})
        into.append(time.perf_counter() - started)


async def per_call(
    direct: Caller,
    through: Caller,
    blocks: int,
    block: int,
    warmup: int,
    budget: float,
    cpu: CpuClock | None = None,
) -> dict[str, Any]:
    """Sequential echo calls to backend 0, in alternating blocks: direct, then through.

    Stops after `blocks` pairs of blocks, or after at least two once `budget` s are spent.
    With `cpu`, also reports the aggregator's CPU time per call through it.
    """
    await _timed_block(direct, warmup, [])
    await _timed_block(through, warmup, [])
    direct_samples: list[float] = []
    through_samples: list[float] = []
    meter = CpuMeter(cpu)
    began = time.perf_counter()
    for done in range(blocks):
        if done >= 2 and time.perf_counter() - began > budget:
            break
        await _timed_block(direct, block, direct_samples)
        with meter.span():
            await _timed_block(through, block, through_samples)
    d, t = summary_ms(direct_samples), summary_ms(through_samples)
    return {
        "direct": d,
        "through": t,
        "ratio_median": t["median_ms"] / d["median_ms"],
        "ratio_p99": t["p99_ms"] / d["p99_ms"],
        "overhead_median_us": (t["median_ms"] - d["median_ms"]) * 1000,
        "overhead_p99_us": (t["p99_ms"] - d["p99_ms"]) * 1000,
        "aggregator_cpu_per_call_us": meter.per_call_us(len(through_samples)),
    }


# ----------------------------------------------------------------- throughput


async def _pump(call: Caller, backends: int, in_flight: int, seconds: float) -> tuple[int, int, float]:
    """`in_flight` workers, worker w calling backend w % backends, for `seconds`.

    Returns (succeeded, failed, elapsed): elapsed runs until the last call answered.
    """
    ok = failed = 0
    started = trio.current_time()
    deadline = started + seconds

    async def worker(index: int) -> None:
        nonlocal ok, failed
        n = 0
        while trio.current_time() < deadline:
            n += 1
            try:
                await call(index % backends, "echo", {"text": f"w{index} {n}"})
                ok += 1
            except Exception:
                failed += 1

    with trio.move_on_after(seconds + 30):
        async with trio.open_nursery() as nursery:
            for w in range(in_flight):
                nursery.start_soon(worker, w)
    return ok, failed, trio.current_time() - started


@attrs.define
class _Tally:
    ok: int = 0
    failed: int = 0
    seconds: float = 0.0

    def add(self, pumped: tuple[int, int, float]) -> None:
        self.ok += pumped[0]
        self.failed += pumped[1]
        self.seconds += pumped[2]

    def figures(self) -> dict[str, Any]:
        rate = self.ok / self.seconds if self.seconds else 0.0
        return {"calls_per_s": rate, "calls": self.ok, "failed": self.failed}


async def throughput(
    direct: Caller,
    through: Caller,
    backends: int,
    in_flight: int,
    window: float,
    rounds: int,
    cpu: CpuClock | None = None,
) -> dict[str, Any]:
    """Calls per second with `in_flight` concurrent calls, direct and through, alternating."""
    await _pump(direct, backends, in_flight, 0.2)
    await _pump(through, backends, in_flight, 0.2)
    direct_tally, through_tally = _Tally(), _Tally()
    meter = CpuMeter(cpu)
    for _ in range(rounds):
        direct_tally.add(await _pump(direct, backends, in_flight, window))
        with meter.span():
            through_tally.add(await _pump(through, backends, in_flight, window))
    out: dict[str, Any] = {"direct": direct_tally.figures(), "through": through_tally.figures()}
    out["ratio"] = out["through"]["calls_per_s"] / out["direct"]["calls_per_s"]
    out["in_flight"] = in_flight
    out["aggregator_cpu_per_call_us"] = meter.per_call_us(through_tally.ok)
    return out


# ---------------------------------------------------------------------- crash


async def crash(call: Caller, backends: int, kill: Callable[[], bool], bound: float) -> dict[str, Any]:
    """kill -9 the last backend while a `sleep` call to it is in flight.

    Counts the calls to it that fail (the in-flight one included) until one succeeds,
    and the time from the kill to that success, within `bound` s. Meanwhile calls to
    backend 0 (when there is another backend) show whether the others were disturbed.
    """
    victim = backends - 1
    out: dict[str, Any] = {"in_flight": "not started"}
    stop_others = trio.Event()
    others = {"ok": 0, "failed": 0}

    async def in_flight() -> None:
        try:
            with trio.fail_after(bound):
                await call(victim, "sleep", {"ms": 1500})
            out["in_flight"] = "succeeded"
        except trio.TooSlowError:
            out["in_flight"] = f"hung (no answer within {bound:g} s)"
        except Exception as exc:
            out["in_flight"] = "failed: " + short_error(exc)

    async def disturb_others() -> None:
        while not stop_others.is_set():
            try:
                with trio.fail_after(2):
                    await call(0, "echo", {"text": "other"})
                others["ok"] += 1
            except Exception:
                others["failed"] += 1
            with trio.move_on_after(0.05):
                await stop_others.wait()

    failed = 0
    recovered: float | None = None
    last_error = ""
    async with trio.open_nursery() as nursery:
        if backends > 1:
            nursery.start_soon(disturb_others)
        async with trio.open_nursery() as first:
            first.start_soon(in_flight)
            await trio.sleep(0.3)
            if not kill():
                first.cancel_scope.cancel()
                stop_others.set()
                return {"error": "the backend process to kill was not found"}
            killed = time.perf_counter()
        if not out["in_flight"].startswith("succeeded"):
            failed += 1
        answered, retries, last_error = await _until_answered(call, victim, killed + bound)
        failed += retries
        recovered = None if answered is None else answered - killed
        stop_others.set()
    out |= {
        "failed_calls": failed,
        "recovered_s": recovered,
        "bound_s": bound,
        "last_error": last_error,
        "other_backend_calls": others if backends > 1 else None,
    }
    return out


async def _until_answered(call: Caller, victim: int, end: float) -> tuple[float | None, int, str]:
    """`echo` to `victim` every 100 ms until one succeeds or `end` (perf_counter) passes.

    Returns (when the first success came back, or None; calls that failed; the last error).
    """
    failed, last_error = 0, ""
    while (left := end - time.perf_counter()) > 0:
        try:
            with trio.fail_after(min(left, 5.0)):
                await call(victim, "echo", {"text": "back?"})
            return time.perf_counter(), failed, last_error
        except Exception as exc:
            failed += 1
            last_error = short_error(exc) if not isinstance(exc, trio.TooSlowError) else "timed out"
            await trio.sleep(min(0.1, max(0.0, end - time.perf_counter())))
    return None, failed, last_error


async def later_call(
    call: Caller, backends: int, kill: Callable[[], bool], quiet: float, bound: float
) -> dict[str, Any]:
    """kill -9 the last backend with nothing in flight, let `quiet` s pass, then call it.

    What a user meets who calls a tool a while after its server crashed: an aggregator
    that restarts a backend as it dies answers as usual; one that re-spawns it on the
    next call makes that call wait for the start-up (or fails it). Times the calls from
    the first one's start to the first success, within `bound` s.
    """
    victim = backends - 1
    if not kill():
        return {"error": "the backend process to kill was not found"}
    await trio.sleep(quiet)
    started = time.perf_counter()
    answered, failed, last_error = await _until_answered(call, victim, started + bound)
    return {
        "quiet_s": quiet,
        "answered_ms": None if answered is None else (answered - started) * 1000,
        "failed_calls": failed,
        "last_error": last_error,
        "bound_s": bound,
    }
