"""The control socket's `web` command: the page's address, or why there is none."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

from assern.actors.listener.control import answer
from assern.actors.listener.page.actor import PageAddress
from assern.supervisor.mailbox import ActorGone

LINE = b'{"v": 1, "id": 3, "command": "web"}'


async def reply_with(page: Any) -> dict[str, Any]:
    line, _ = await answer(cast("Any", SimpleNamespace(page=page)), LINE)
    reply: dict[str, Any] = json.loads(line)
    assert reply["id"] == 3
    return reply


async def test_web_answers_the_address_and_the_one_time_login() -> None:
    async def page() -> PageAddress:
        return PageAddress(
            url="http://127.0.0.1:5/", login="http://127.0.0.1:5/login?code=C", expires_in=120.0
        )

    reply = await reply_with(page)
    assert reply["result"] == {
        "url": "http://127.0.0.1:5/",
        "login": "http://127.0.0.1:5/login?code=C",
        "expires_in_s": 120.0,
    }


async def test_web_says_why_there_is_no_page() -> None:
    async def unbindable() -> PageAddress:
        raise OSError(24, "Too many open files")

    async def gone() -> PageAddress:
        raise ActorGone

    for page, words in (
        (None, "serves no status page"),
        (unbindable, "cannot be served: [Errno 24] Too many open files"),
        (gone, "went away"),
    ):
        reply = await reply_with(page)
        assert reply["ok"] is False
        assert reply["error"]["code"] == "command_failed"
        assert words in reply["error"]["message"]
