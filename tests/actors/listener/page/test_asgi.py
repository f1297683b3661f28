"""The status page's application, driven as its server drives it (ASGI messages)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
import trio
import trio.testing

from assern.actors.listener.page import asgi
from assern.actors.listener.page.asgi import PageApp
from assern.actors.listener.page.codes import Keys

PORT = 4321


class World:
    """A page app over a status document the test changes."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {"version": "1.0", "backends": [{"name": "alpha", "state": "ready"}]}
        self.levels: list[str | None] = []
        self.keys = Keys()
        self.app = PageApp(keys=self.keys, port=PORT, status=self.status, logs=self.logs)

    async def status(self) -> Mapping[str, Any]:
        return self.doc

    async def logs(self, level: str | None, count: int) -> Sequence[Mapping[str, Any]]:
        self.levels.append(level)
        return [{"ts": "2026-01-01T00:00:00Z", "level": "warning", "event": "something"}]

    def signed_in(self) -> str:
        token = self.keys.redeem(self.keys.mint())
        assert token is not None
        return token


class Answer:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""


def scope(path: str, query: str = "", *, method: str = "GET", peer: str = "127.0.0.1", **headers: str) -> Any:
    given = {"host": f"127.0.0.1:{PORT}", **headers}
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query.encode(),
        "headers": [(k.encode(), v.encode()) for k, v in given.items()],
        "client": (peer, 50000),
    }


async def get(world: World, path: str, query: str = "", **options: Any) -> Answer:
    answer = Answer()

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            answer.body += message.get("body", b"")

    await world.app(scope(path, query, **options), receive, send)
    return answer


def cookie(token: str) -> str:
    return f"assern_page={token}"


async def test_a_code_signs_in_once_and_redirects_to_a_clean_address() -> None:
    world = World()
    code = world.keys.mint()
    answer = await get(world, "/login", f"code={code}")
    assert answer.status == 303
    assert answer.headers["location"] == "/"
    token = answer.headers["set-cookie"].split(";")[0].removeprefix("assern_page=")
    assert "HttpOnly" in answer.headers["set-cookie"]
    assert "SameSite=Strict" in answer.headers["set-cookie"]
    page = await get(world, "/", cookie=cookie(token))
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'id="backend-alpha"' in page.body.decode()
    again = await get(world, "/login", f"code={code}")
    assert again.status == 403
    assert "set-cookie" not in again.headers


async def test_wrong_codes_are_refused_and_logged_without_them() -> None:
    world = World()
    world.keys.mint()
    with structlog.testing.capture_logs() as logs:
        for query in ("code=guessed", "", "code=a&code=b"):
            answer = await get(world, "/login", query)
            assert answer.status == 403
            assert b"run `assernctl web`" in answer.body
    assert [event["reason"] for event in logs] == ["bad_code"] * 3
    assert "guessed" not in json.dumps(logs)


async def test_the_page_and_its_events_need_the_cookie() -> None:
    world = World()
    for path in ("/", "/events"):
        assert (await get(world, path)).status == 401
        assert (await get(world, path, cookie=cookie("forged"))).status == 401
    assert world.levels == []  # nothing was read for them


async def test_refused_requests() -> None:
    world = World()
    token = world.signed_in()
    assert (await get(world, "/", cookie=cookie(token), host="evil.example:4321")).status == 421
    assert (await get(world, "/", cookie=cookie(token), origin="http://evil.example")).status == 403
    assert (await get(world, "/", cookie=cookie(token), peer="192.168.0.9")).status == 403
    assert (await get(world, "/", cookie=cookie(token), method="POST")).status == 405
    code = world.keys.mint()
    assert (await get(world, "/login", f"code={code}", host="evil.example:4321")).status == 421
    assert (await get(world, "/login", f"code={code}")).status == 303  # the refusal did not use it up
    level = await get(world, "/", "level=loud", cookie=cookie(token))
    assert level.status == 400
    assert b"debug, info, warning, error, critical" in level.body
    assert (await get(world, "/admin", cookie=cookie(token))).status == 404


async def test_every_answer_carries_the_policy() -> None:
    world = World()
    for path in ("/", "/login", "/page.js", "/nothing"):
        answer = await get(world, path)
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"


async def test_the_static_files() -> None:
    world = World()
    script = await get(world, "/page.js")
    assert script.status == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert b"EventSource" in script.body
    assert (await get(world, "/page.css")).headers["content-type"] == "text/css"
    assert (await get(world, "/favicon.svg")).headers["content-type"] == "image/svg+xml"


async def test_the_level_filter_reaches_the_log_tail() -> None:
    world = World()
    token = world.signed_in()
    page = await get(world, "/", "level=error", cookie=cookie(token))
    assert '<option value="error" selected>' in page.body.decode()
    await get(world, "/", cookie=cookie(token))
    assert world.levels == ["error", "info"]


def events_of(body: bytes) -> list[dict[str, str]]:
    found = []
    for block in body.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if lines.get("event") == "parts":
            found.append(json.loads(lines["data"]))
    return found


async def test_events_send_every_part_then_what_changed_until_the_page_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World()
    token = world.signed_in()
    answer = Answer()
    leave = trio.Event()
    sent = trio.Event()

    async def receive() -> Any:
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            answer.body += message.get("body", b"")
            sent.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.app, scope("/events", cookie=cookie(token)), receive, send)
        await sent.wait()
        assert world.app.streams == 1
        world.doc["backends"][0]["state"] = "failed"
        await trio.sleep(asgi.INTERVAL * 1.5)
        leave.set()
    assert world.app.streams == 0
    assert answer.status == 200
    assert answer.headers["content-type"] == "text/event-stream"
    first, second = events_of(answer.body)
    assert set(first) == {"instance", "backends", "sessions", "calls", "context", "more", "logs"}
    assert set(second) == {"backends"}
    assert 'data-state="failed"' in second["backends"]


async def test_open_pages_are_bounded(autojump_clock: trio.testing.MockClock) -> None:
    world = World()
    token = world.signed_in()
    world.app.streams = asgi.MAX_STREAMS
    answer = await get(world, "/events", cookie=cookie(token))
    assert answer.status == 429
