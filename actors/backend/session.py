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
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types

from assern.actors.backend.client import open_client
from assern.actors.identity import NAME, __version__

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from assern.actors.backend.hooks import SessionHooks
    from assern.actors.backend.messages import ProgressSink, Rounds
    from assern.actors.backend.transport import ProcessLink
    from assern.actors.config.spec import ServerSpec

#: How assern introduces itself to its backends.
CLIENT_INFO = types.Implementation(name=NAME, version=__version__)


class BackendSession(Protocol):
    """An initialized connection to one backend, as the backend actor uses it."""

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the connection speaks."""

    @property
    def server_capabilities(self) -> types.ServerCapabilities:
        """What the backend said it serves (empty when a version pin skipped the handshake)."""

    @property
    def instructions(self) -> str | None:
        """What the backend said about how to use it (its `instructions`), if anything."""

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
        rounds: Rounds | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One tools/call; `progress` gets the backend's progress notifications for it.

        With `rounds` (a client that takes input rounds itself) a 2026-07-28 backend's
        `InputRequiredResult` is returned as it came; without, it never is.
        """

    async def read_resource(
        self, uri: str, *, rounds: Rounds | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None, *, rounds: Rounds | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

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
