"""The roots a client reports (MCP roots), kept per connection and checked against its folder.

A handshake-era client that declares the `roots` capability in its `initialize` is asked
`roots/list` once it sends `notifications/initialized`, and again on every
`notifications/roots/list_changed`. The question runs in a task of its own, bounded by
`ROOTS_TIMEOUT`: nothing the client asked for waits on it, and a client that never
answers holds nothing. An error answer, or an answer that is not a list of roots, is
noted (status shows it) and the connection goes on. A 2026-07-28 client is never asked
(that era has no requests from the server outside a call's input rounds).

Our question is a server-to-client request like a backend's own `roots/list` (which
still goes to the client whose call caused it, with the backend's answer validated on
the way): both go out through the session's one request table with ids of its own,
so their answers never mix.

The roots decide nothing. The folder the session's configuration was resolved for (the
project root, the folder holding `.assern/`, else the working folder the client started
in) decides its configuration, as the shim's hello gave it. Roots come after
`initialize` and may change at any time; switching a session's view on them would
change the tools under a client mid-session. They are shown in status and checked: a
folder outside every root the client reports is a warning on that session (and one
`session_roots_disagree` log line per disagreement). A client that reports no roots at
all names no folder: nothing is checked.

`parse_roots` is pure, and so is the check (roots_check.py, which status rendering
imports without the protocol models).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
import structlog
import trio
from pydantic import ValidationError

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.roots_check import SessionFolder, disagreement

log = structlog.get_logger()

#: Seconds a client has to answer our `roots/list`.
ROOTS_TIMEOUT = 5.0

#: How a connection sends its client a request (`ServerSession.ask`).
Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]


def parse_roots(result: Any) -> tuple[str, ...]:
    """The root URIs of a client's `roots/list` result.

    Raises:
        ValueError: the result is not a `ListRootsResult`; the message says what is wrong.
    """
    try:
        parsed = types.ListRootsResult.model_validate(result, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "not a roots/list result"}
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise ValueError(f"{where}: {first['msg']}" if where else str(first["msg"])) from None
    return tuple(str(root.uri) for root in parsed.roots)


class ClientRoots:
    """One connection's roots: whether its client offers them, the last ones it
    reported, what went wrong asking, and whether they disagree with its folder.

    Args:
        folder: The folder the session's configuration was resolved for (None: unknown,
            nothing is checked).
    """

    def __init__(self, folder: SessionFolder | None) -> None:
        self.folder = folder
        #: the client declared the `roots` capability
        self.supported = False
        #: the roots it last reported (None: not known yet)
        self.roots: tuple[str, ...] | None = None
        #: why the last question got no roots (an error, garbage, no answer in time)
        self.error: str | None = None
        self._asking = False
        self._again = False
        self._logged: str | None = None

    def declared(self, capabilities: Any) -> None:
        """Record what the client's `initialize` said of roots."""
        self.supported = isinstance(capabilities, Mapping) and isinstance(capabilities.get("roots"), Mapping)

    @property
    def warning(self) -> str | None:
        if self.folder is None or self.roots is None:
            return None
        return disagreement(self.folder, self.roots)

    def refresh(self, nursery: trio.Nursery, ask: Ask) -> None:
        """Ask the client for its roots in a task of `nursery` (at once: nothing waits on
        it). A question already out is asked again once it is answered."""
        if not self.supported:
            return
        if self._asking:
            self._again = True
            return
        self._asking = True
        nursery.start_soon(self._ask, ask)

    async def _ask(self, ask: Ask) -> None:
        try:
            while True:
                self._again = False
                await self._ask_once(ask)
                if not self._again:
                    return
        finally:
            self._asking = False

    async def _ask_once(self, ask: Ask) -> None:
        error: str | None = None
        with trio.move_on_after(ROOTS_TIMEOUT) as waited:
            try:
                roots = parse_roots(await ask("roots/list", None))
            except RpcError as exc:
                error = f"roots/list was answered with an error: {exc.code} {exc.message}"
            except ValueError as exc:
                error = f"roots/list was answered with something else than roots: {exc}"
            else:
                self.roots, self.error = roots, None
                log.info("session_roots", roots=list(roots))
                self._check()
                return
        if waited.cancelled_caught:
            error = f"no answer to roots/list within {ROOTS_TIMEOUT:g} s"
        self.error = error
        log.warning("session_roots_unknown", error=error)

    def _check(self) -> None:
        """Log a disagreement with the folder once (again only when it changes)."""
        warning = self.warning
        if warning is not None and warning != self._logged:
            assert self.folder is not None
            log.warning(
                "session_roots_disagree",
                folder=self.folder.path,
                roots=list(self.roots or ()),
                warning=warning,
            )
        self._logged = warning

    def document(self) -> dict[str, Any]:
        """What status shows of these roots."""
        return {
            "supported": self.supported,
            "roots": list(self.roots) if self.roots is not None else None,
            "error": self.error,
            "warning": self.warning,
        }
