"""asyncio middlewares on the process's one asyncio loop (trio-asyncio): an asyncio-only
client library works in them, `next` runs the trio side, failures and cancellation cross
the boundary in both directions."""

from __future__ import annotations

import mcp_types as types
import pytest
import trio
from sample_middlewares import approval_service

from assern.actors.config.spec import MiddlewareSpec
from assern.actors.gate.asyncio_host import AsyncioHost
from assern.actors.gate.chain import Middlewares
from assern.actors.gate.middleware import Call

CALL = Call(server="notes", tool="add", exposed="notes_add", arguments={"text": "hello"})


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def echo(call: Call) -> types.CallToolResult:
    trio.lowlevel.current_task()  # the backend side runs on trio
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"got {call.arguments['text']}")]
    )


def running(host: AsyncioHost) -> bool:
    return host.running


async def test_the_loop_opens_only_when_an_asyncio_middleware_is_built() -> None:
    host = AsyncioHost()
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        Middlewares(host).chain(
            [MiddlewareSpec(name="rl", use="rate_limit", options={"calls": 1})], "s", ("t",)
        )
        await trio.sleep(0.05)
        assert not running(host)
        with approval_service() as service:
            spec = MiddlewareSpec(
                name="approval", use="sample_middlewares:approval", options={"url": service.url}, asyncio=True
            )
            chain = Middlewares(host).chain([spec], "notes", ("notes_add",))
            assert chain is not None
            result = await chain.run(CALL, echo)
            assert running(host)
        nursery.cancel_scope.cancel()
    assert text(result) == "got HELLO"
    assert service.asked == [{"tool": "notes_add", "arguments": {"text": "hello"}}]


async def test_an_asyncio_middleware_can_refuse_and_its_failures_name_it() -> None:
    host = AsyncioHost()
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        with approval_service() as service:
            good = MiddlewareSpec(
                name="approval", use="sample_middlewares:approval", options={"url": service.url}, asyncio=True
            )
            chain = Middlewares(host).chain([good], "notes", ("notes_add",))
            assert chain is not None
            refused = await chain.run(CALL.with_arguments({"text": "forbidden"}), echo)
        dead = MiddlewareSpec(
            name="down",
            use="sample_middlewares:approval",
            options={"url": "http://127.0.0.1:1/"},
            asyncio=True,
        )
        failing = Middlewares(host).chain([dead], "notes", ("notes_add",))
        assert failing is not None
        failed = await failing.run(CALL, echo)
        nursery.cancel_scope.cancel()
    assert refused.is_error
    assert text(refused) == "not approved: forbidden word"
    assert failed.is_error
    assert text(failed).startswith("Middleware 'down' failed on notes_add: ClientConnectorError")


async def test_the_backends_error_and_cancellation_cross_back_unchanged() -> None:
    host = AsyncioHost()

    class Down(Exception):
        pass

    async def down(call: Call) -> types.CallToolResult:
        raise Down("backend down")

    cancelled = trio.Event()

    async def hangs(call: Call) -> types.CallToolResult:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError

    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        with approval_service() as service:
            spec = MiddlewareSpec(
                name="approval", use="sample_middlewares:approval", options={"url": service.url}, asyncio=True
            )
            chain = Middlewares(host).chain([spec], "notes", ("notes_add",))
            assert chain is not None
            with pytest.raises(Down, match="backend down"):
                await chain.run(CALL, down)
            with trio.move_on_after(0.5) as scope:
                await chain.run(CALL, hangs)
            assert scope.cancelled_caught
            with trio.fail_after(5):
                await cancelled.wait()  # the backend's side was cancelled with the caller
        nursery.cancel_scope.cancel()
