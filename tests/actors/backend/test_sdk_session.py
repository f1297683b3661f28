"""The SDK's `Client` as a backend session (sdk_client.py): what it asks of the SDK."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.backend.hooks import SessionHooks
from assern.actors.backend.sdk_client import SdkSession, routing_headers


class Session:
    def __init__(self) -> None:
        self.pings = 0

    async def send_ping(self) -> types.EmptyResult:
        self.pings += 1
        return types.EmptyResult()


async def test_a_ping_goes_through_the_session_without_a_deprecation_warning() -> None:
    """The SDK's `Client.send_ping` is marked deprecated (2026-07-28 has no ping) and
    warned on assern's stderr at every idle backend's ping; the session's is not."""
    session = Session()
    client = SimpleNamespace(session=session, protocol_version="2025-11-25")

    async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise AssertionError("nothing is asked")

    hooks = SessionHooks(
        list_changed=lambda: None, notify=lambda _n: None, bad_message=lambda _m: None, ask=ask
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await SdkSession(client, hooks).send_ping()  # type: ignore[arg-type]  # a stand-in client
    assert session.pings == 1


def test_routing_headers_come_from_the_session_s_stamp_run_on_a_scratch_copy() -> None:
    seen: list[dict[str, Any]] = []

    def stamp(data: dict[str, Any], opts: dict[str, Any]) -> None:
        seen.append(data)
        data["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
        opts.setdefault("headers", {}).update(
            {"mcp-method": data["method"], "mcp-name": data["params"]["name"]}
        )

    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "h1"}}
    headers = routing_headers(SimpleNamespace(_stamp=stamp))("tools/call", params)
    assert headers == {"mcp-method": "tools/call", "mcp-name": "echo"}
    assert params["_meta"] == {"progressToken": "h1"}  # the request's own envelope, untouched
    assert seen[0]["params"]["arguments"] == {"text": "hi"}


class ListeningClient:
    """A stand-in `Client` on 2026-07-28 whose listen streams are acknowledged by the
    test (the first) or one second after they are asked for (the others)."""

    protocol_version = "2026-07-28"

    def __init__(self) -> None:
        self.session = SimpleNamespace(_stamp=lambda data, opts: None)
        self.first_ack = trio.Event()
        self.asked: list[list[str]] = []
        self.acked: list[list[str]] = []

    @asynccontextmanager
    async def listen(self, *, resource_subscriptions: list[str], **_: bool) -> AsyncIterator[Any]:
        self.asked.append(resource_subscriptions)
        if len(self.asked) == 1:
            await self.first_ack.wait()
        else:
            await trio.sleep(1)
        self.acked.append(resource_subscriptions)
        yield self

    def __aiter__(self) -> ListeningClient:
        return self

    async def __anext__(self) -> Any:
        await trio.sleep_forever()


def quiet_hooks() -> SessionHooks:
    async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise AssertionError("nothing is asked")

    return SessionHooks(
        list_changed=lambda: None, notify=lambda _n: None, bad_message=lambda _m: None, ask=ask
    )


async def test_a_subscription_waits_for_the_stream_naming_its_uri_not_an_older_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The first stream's acknowledgement reaches the listening task after a subscription
    re-opened it: that acknowledgement (of the old set of URIs) must not answer the
    subscription, or an update sent at once is lost."""
    client = ListeningClient()
    session = SdkSession(client, quiet_hooks())  # type: ignore[arg-type]  # a stand-in client
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(session.listen, tools=True, prompts=False, resources=True))
        await trio.testing.wait_all_tasks_blocked()
        assert client.asked == [[]]
        client.first_ack.set()  # on its way: the listening task runs again after this one waits
        await session.subscribe_resource("test://info")
        assert client.acked[-1] == ["test://info"]
        await session.unsubscribe_resource("test://info")
        assert client.acked[-1] == []
        nursery.cancel_scope.cancel()


async def test_a_subscription_does_not_wait_for_a_stream_that_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Refusing(ListeningClient):
        @asynccontextmanager
        async def listen(self, *, resource_subscriptions: list[str], **_: bool) -> AsyncIterator[Any]:
            self.asked.append(resource_subscriptions)
            if self.asked:  # always: a generator that raises on entry
                raise RuntimeError("refused")
            yield self

    session = SdkSession(Refusing(), quiet_hooks())  # type: ignore[arg-type]  # a stand-in client
    with pytest.raises(RuntimeError):
        await session.listen(tools=True, prompts=False, resources=True)
    start = trio.current_time()
    await session.subscribe_resource("test://info")
    assert trio.current_time() == start
