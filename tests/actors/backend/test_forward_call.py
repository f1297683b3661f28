"""A raw-lane call through a backend's mailbox (`ForwardCall`, calls.py): posted to a
streamable-HTTP backend by its lane, or, for an incarnation that came back without a
raw lane, through its session with the result as JSON."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import trio

from assern.actors.backend.calls import CallDesk
from assern.actors.backend.messages import ForwardCall, ProgressSink
from assern.actors.backend.transport import ProcessLink
from assern.actors.config.spec import ServerSpec
from assern.supervisor.mailbox import Pending, Reply, new_reply

SPEC = ServerSpec(name="remote", transport="streamable-http", url="http://backend.test/mcp")


class Poster:
    """A raw lane that answers every request with what it was asked, and one progress step."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any] | None]] = []

    async def request(
        self, method: str, params: dict[str, Any] | None = None, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        self.asked.append((method, params))
        if progress is not None:
            await progress(1, 2, "half")
        return {"content": [], "posted": True}


class Session:
    """Just enough of a backend session for a tools/call."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None, **_: Any) -> types.CallToolResult:
        text = types.TextContent(type="text", text=f"{name} via the session")
        return types.CallToolResult(content=[text], structured_content={"args": arguments})


def desk(link: ProcessLink) -> CallDesk:
    calls = CallDesk(SPEC, finish=lambda _error: None, ended=lambda: False, last_exit=lambda: None)
    calls.begin(link)
    return calls


async def forward(calls: CallDesk, progress: ProgressSink | None = None) -> Any:
    reply: Reply[dict[str, Any]]
    pending: Pending[dict[str, Any]]
    reply, pending = new_reply()
    msg = ForwardCall(
        name="echo", arguments={"text": "hi"}, meta={"trace": "t"}, progress=progress, reply=reply
    )
    await calls.handle(Session(), msg)  # type: ignore[arg-type]  # a stand-in session
    return await pending.result()


async def test_a_forwarded_call_is_posted_by_the_backend_s_raw_lane() -> None:
    poster = Poster()
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    result = await forward(desk(ProcessLink(poster=poster)), on_progress)
    assert result == {"content": [], "posted": True}
    assert poster.asked == [
        ("tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"trace": "t"}})
    ]
    assert steps == [1]


async def test_without_a_raw_lane_a_forwarded_call_takes_the_session_and_comes_back_as_json() -> None:
    with trio.fail_after(5):
        result = await forward(desk(ProcessLink()))
    assert result == {
        "content": [{"type": "text", "text": "echo via the session"}],
        "structuredContent": {"args": {"text": "hi"}},
        "isError": False,
    }
