"""tools/call latencies and outcomes, as the listener's client sessions measured them.

Owned by the listener actor: its sessions record each finished call (from the moment
the call was handed to the backend's mailbox until the answer came back). The control
socket reads the recent medians per backend for `assernctl status`; the HTTP front's
`/metrics` reads the running totals per server and tool (a latency histogram and the
count of each outcome: "ok", "tool_error" for a result with `isError`, "error" for a
call that failed). The totals are kept from the moment `/metrics` is served
(`keep_totals`): an instance without it pays a call nothing for them. The last `RECENT`
calls (when, which client, server and tool, how long, how it ended; never the
arguments) are kept in a ring for the status page: a tuple appended to a bounded deque
per call.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from typing import Any

import attrs

#: How many recent calls per backend the median is taken over.
WINDOW = 256
#: How many of the last calls (of every backend) the ring of recent calls keeps.
RECENT = 50
#: Upper bounds (seconds) of the latency histogram's buckets (the last is +Inf).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@attrs.define
class Series:
    """Running totals of one tool's calls."""

    counts: list[int] = attrs.field(factory=lambda: [0] * (len(BUCKETS) + 1))
    total_seconds: float = 0.0
    outcomes: dict[str, int] = attrs.field(factory=dict)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, calls at most that long) per bucket, +Inf last."""
        running, out = 0, []
        for bound, count in zip((*BUCKETS, float("inf")), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class CallStats:
    """A bounded window of recent call durations (milliseconds) per backend."""

    def __init__(self, window: int = WINDOW, recent: int = RECENT) -> None:
        self._window = window
        self._recent: dict[str, deque[float]] = {}
        #: (epoch seconds, client, server, tool, duration ms, outcome) of the last calls
        self._calls: deque[tuple[float, str | None, str, str, float, str]] = deque(maxlen=recent)
        self._series: dict[tuple[str, str], Series] = {}
        self._totals = False

    def keep_totals(self) -> None:
        """Keep the running totals per tool from now on (`/metrics` reads them)."""
        self._totals = True

    def record(
        self, server: str, duration_ms: float, tool: str = "", outcome: str = "ok", client: str | None = None
    ) -> None:
        """Count one finished call; `client` is the caller's `clientInfo.name`."""
        recent = self._recent.get(server)
        if recent is None:
            recent = self._recent[server] = deque(maxlen=self._window)
        recent.append(duration_ms)
        self._calls.append((time.time(), client, server, tool, duration_ms, outcome))
        if not self._totals:
            return
        series = self._series.get((server, tool))
        if series is None:
            series = self._series[server, tool] = Series()
        seconds = duration_ms / 1000
        series.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        series.total_seconds += seconds
        series.outcomes[outcome] = series.outcomes.get(outcome, 0) + 1

    def series(self) -> dict[tuple[str, str], Series]:
        """The running totals by (server, the server's own tool name)."""
        return dict(self._series)

    def recent_calls(self) -> list[dict[str, Any]]:
        """The last calls, newest first: at (epoch seconds), client, server, tool,
        duration_ms, outcome."""
        return [
            {
                "at": round(at, 3),
                "client": client,
                "server": server,
                "tool": tool,
                "duration_ms": round(duration, 3),
                "outcome": outcome,
            }
            for at, client, server, tool, duration, outcome in reversed(self._calls)
        ]

    def median(self, server: str) -> float | None:
        """The median of the recent calls to `server` in ms, or None before the first."""
        recent = self._recent.get(server)
        import statistics  # only here: not loaded until needed

        return round(statistics.median(recent), 3) if recent else None

    def samples(self, server: str) -> int:
        recent = self._recent.get(server)
        return len(recent) if recent else 0
