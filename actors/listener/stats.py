"""Recent tools/call latencies per backend, as the listener's client sessions measured them.

Owned by the listener actor: its sessions record each finished call (from the moment
the call was handed to the backend's mailbox until the answer came back), and its
control socket reads the medians for `assernctl status`.
"""

from __future__ import annotations

import statistics
from collections import deque

#: How many recent calls per backend the median is taken over.
WINDOW = 256


class CallStats:
    """A bounded window of recent call durations (milliseconds) per backend."""

    def __init__(self, window: int = WINDOW) -> None:
        self._window = window
        self._recent: dict[str, deque[float]] = {}

    def record(self, server: str, duration_ms: float) -> None:
        recent = self._recent.get(server)
        if recent is None:
            recent = self._recent[server] = deque(maxlen=self._window)
        recent.append(duration_ms)

    def median(self, server: str) -> float | None:
        """The median of the recent calls to `server` in ms, or None before the first."""
        recent = self._recent.get(server)
        return round(statistics.median(recent), 3) if recent else None

    def samples(self, server: str) -> int:
        recent = self._recent.get(server)
        return len(recent) if recent else 0
