"""`use = "rate_limit"`: at most `calls` calls per `per` seconds, and at most
`concurrency` calls in flight, per tool (or per server, or for all its tools together).

    [[middleware]]
    use = "rate_limit"
    tools = ["github_*"]
    options = { calls = 30, per = 60, concurrency = 4, wait = 30, scope = "tool" }

A call past the rate is answered at once with an error saying when to try again (the
backend is not called); a call past the concurrency cap waits up to `wait` seconds for a
free slot, then gets an error. Counts live as long as the entry stays as configured.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import structlog
import trio

from assern.actors.gate.middleware import error_result
from assern.actors.gate.middlewares.options import at_least, read_options

if TYPE_CHECKING:
    from collections.abc import Mapping

    import mcp_types as types

    from assern.actors.gate.middleware import Call, Next

log = structlog.get_logger()

SCOPES = ("tool", "server", "all")


class RateLimit:
    """The middleware: its windows and slots by key (tool, server, or one for all)."""

    def __init__(
        self, *, calls: int | None, per: float, concurrency: int | None, wait: float, scope: str
    ) -> None:
        self.calls, self.per, self.concurrency, self.wait, self.scope = calls, per, concurrency, wait, scope
        #: when each of the last `calls` calls was let through, by key
        self._windows: dict[tuple[str, ...], deque[float]] = {}
        self._slots: dict[tuple[str, ...], trio.CapacityLimiter] = {}

    def key(self, call: Call) -> tuple[str, ...]:
        if self.scope == "tool":
            return (call.server, call.tool)
        return (call.server,) if self.scope == "server" else ()

    def retry_after(self, key: tuple[str, ...], now: float) -> float | None:
        """Seconds until a call of `key` fits the rate (None: it fits now, and is counted)."""
        if self.calls is None:
            return None
        window = self._windows.setdefault(key, deque())
        while window and window[0] <= now - self.per:
            window.popleft()
        if len(window) >= self.calls:
            return window[0] + self.per - now
        window.append(now)
        return None

    def _what(self, call: Call) -> str:
        if self.scope == "tool":
            return call.exposed
        return f"server '{call.server}'" if self.scope == "server" else "these tools"

    async def __call__(self, call: Call, next_: Next) -> types.CallToolResult:
        key = self.key(call)
        retry = self.retry_after(key, trio.current_time())
        if retry is not None:
            log.info(
                "call_refused", server=call.server, tool=call.tool, rule="rate_limit", client=call.client
            )
            return error_result(
                f"Rate limit reached: at most {self.calls} calls per {self.per:g} s for "
                f"{self._what(call)}. Try again in {retry:.1f} s."
            )
        if self.concurrency is None:
            return await next_(call)
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = trio.CapacityLimiter(self.concurrency)
        with trio.move_on_after(self.wait) as waiting:
            await slots.acquire()
        if not waiting.cancelled_caught:
            try:
                return await next_(call)
            finally:
                slots.release()
        log.info("call_refused", server=call.server, tool=call.tool, rule="concurrency", client=call.client)
        return error_result(
            f"Too many calls in flight: at most {self.concurrency} at a time for {self._what(call)}, "
            f"and none finished within {self.wait:g} s. Try again later."
        )


def factory(options: Mapping[str, Any]) -> RateLimit:
    """Options: `calls` and `per` (seconds, default 60), `concurrency`, `wait` (seconds a
    call waits for a slot, default 30), `scope` ("tool", "server" or "all")."""
    read = read_options(
        options, {"calls": int, "per": float, "concurrency": int, "wait": float, "scope": str}
    )
    if "calls" not in read and "concurrency" not in read:
        raise ValueError("give `calls` (with `per`), `concurrency`, or both")
    at_least("calls", read.get("calls"), 1)
    at_least("per", read.get("per"), 0.001)
    at_least("concurrency", read.get("concurrency"), 1)
    at_least("wait", read.get("wait"), 0)
    scope = read.get("scope", "tool")
    if scope not in SCOPES:
        raise ValueError(f"option 'scope' expects one of {', '.join(SCOPES)}, got {scope!r}")
    return RateLimit(
        calls=read.get("calls"),
        per=read.get("per", 60.0),
        concurrency=read.get("concurrency"),
        wait=read.get("wait", 30.0),
        scope=scope,
    )
