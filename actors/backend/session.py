"""What the backend actor asks of its connection to one backend, whoever speaks it.

Two kinds of session sit behind one interface, so that the actor's lifecycle (list,
serve, ping, refresh, restart) is the same code for both:

- `HandshakeClient` (client.py), our own handshake-era JSON-RPC client, for stdio
  backends on protocol "legacy" (the default). It needs nothing of the `mcp` SDK,
  which keeps the SDK (and what it imports) out of an aggregator that only has such
  backends.
- `SdkSession` (sdk_client.py), an adapter over the SDK's `Client`, for HTTP and SSE
  backends and for protocol "auto" or a version pin. `open_session` imports it only
  when such a backend starts.

Both raise `RpcError` when the backend answers a request with an error (or with a
result that does not validate) and `ForwardLost` when the backend goes away.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import attrs
import mcp_types as types

from assern.actors.backend.client import open_client
from assern.actors.backend.messages import ProgressSink
from assern.actors.backend.transport import ProcessLink
from assern.actors.config.spec import ServerSpec

#: How assern introduces itself to its backends.
CLIENT_INFO = types.Implementation(name="assern", version="0.1.0")


@attrs.frozen(kw_only=True, eq=False)
class SessionHooks:
    """Where a session sends what its backend says unasked, and what it asks of assern."""

    #: a tools, prompts or resources list changed: the listing is to be fetched again
    list_changed: Callable[[], None]
    #: a notification clients should see (resources/updated, a log message)
    notify: Callable[[types.ServerNotification], None]
    #: a message that could not be understood, and why (it is skipped)
    bad_message: Callable[[str], None]
    #: a server-to-client request (sampling, elicitation, roots) for a client to answer:
    #: its method and params in, the result dict out; raises RpcError to refuse it
    ask: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
    #: one line the backend process wrote to its stderr
    stderr: Callable[[str], None] = lambda _line: None
    #: the backend process was started, with this pid
    spawned: Callable[[int], None] = lambda _pid: None


class BackendSession(Protocol):
    """An initialized connection to one backend, as the backend actor uses it."""

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the connection speaks."""

    @property
    def server_capabilities(self) -> types.ServerCapabilities:
        """What the backend said it serves (empty when a version pin skipped the handshake)."""

    async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult: ...

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult: ...

    async def list_resource_templates(
        self, cursor: str | None = None
    ) -> types.ListResourceTemplatesResult: ...

    async def list_prompts(self, cursor: str | None = None) -> types.ListPromptsResult: ...

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        meta: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
    ) -> types.CallToolResult:
        """One tools/call; `progress` gets the backend's progress notifications for it."""

    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult: ...

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult: ...

    async def subscribe_resource(self, uri: str) -> None: ...

    async def unsubscribe_resource(self, uri: str) -> None: ...

    async def set_logging_level(self, level: types.LoggingLevel) -> None: ...

    async def send_ping(self) -> None: ...

    async def listen(self, *, tools: bool, prompts: bool, resources: bool) -> None:
        """Follow list changes until the backend ends the stream (2026-07-28 backends).

        Each change calls `hooks.list_changed`. Handshake-era backends send their
        changes as notifications instead, so there it returns at once.
        """


def speaks_sdk(spec: ServerSpec) -> bool:
    """Whether the backend needs the SDK: not a stdio backend on protocol "legacy"."""
    return spec.transport != "stdio" or spec.protocol != "legacy"


@contextlib.asynccontextmanager
async def open_session(
    spec: ServerSpec, link: ProcessLink, hooks: SessionHooks
) -> AsyncIterator[BackendSession]:
    """Start (or connect to) the backend and yield its initialized session.

    Must be entered and exited by one task (the SDK's context managers demand it).
    Leaving it stops the backend process, if there is one.
    """
    if speaks_sdk(spec):
        from assern.actors.backend.sdk_client import open_sdk_session

        async with open_sdk_session(spec, link, hooks, CLIENT_INFO) as sdk_session:
            yield sdk_session
        return
    async with open_client(spec, link, hooks, CLIENT_INFO) as client:
        yield client
