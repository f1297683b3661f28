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

`parse_roots`, `root_folder` and `disagreement` are pure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import attrs
import mcp_types as types
import structlog
import trio
from pydantic import ValidationError

from assern.actors.jsonrpc.errors import RpcError

if TYPE_CHECKING:
    from assern.actors.config.spec import ResolvedConfig

log = structlog.get_logger()

#: Seconds a client has to answer our `roots/list`.
ROOTS_TIMEOUT = 5.0

#: How a connection sends its client a request (`ServerSession.ask`).
Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]


@attrs.frozen(kw_only=True)
class SessionFolder:
    """The folder a session's configuration was resolved for.

    Attributes:
        path: An absolute folder.
        kind: What it is: "project root" (the folder holding `.assern/`) or
            "working folder" (where the client started, when no `.assern/` is above it).
    """

    path: str
    kind: str = "working folder"


def config_folder(config: ResolvedConfig) -> SessionFolder | None:
    """The folder `config` was resolved for: its project root, else its working folder."""
    if config.local_root is not None:
        return SessionFolder(path=str(config.local_root), kind="project root")
    if config.cwd is not None:
        return SessionFolder(path=str(config.cwd), kind="working folder")
    return None


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


def root_folder(uri: str) -> PurePosixPath | None:
    """The local folder a root URI names (`file:///home/me/x`), None for any other URI."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    return PurePosixPath(path) if path.startswith("/") else None


def _inside(folder: PurePosixPath, root: PurePosixPath) -> bool:
    return folder == root or root in folder.parents


def disagreement(folder: SessionFolder, roots: Sequence[str]) -> str | None:
    """The warning for a session whose folder is outside every root, None when it is not.

    A client that reports no roots names no folder: there is nothing to disagree with.
    """
    if not roots:
        return None
    path = PurePosixPath(folder.path)
    if any((root := root_folder(uri)) is not None and _inside(path, root) for uri in roots):
        return None
    shown = ", ".join(str(root_folder(uri) or uri) for uri in roots)
    return (
        f"{folder.kind} {folder.path} is outside the client's roots {shown}: "
        f"this session is served the configuration of {folder.path}"
    )


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
