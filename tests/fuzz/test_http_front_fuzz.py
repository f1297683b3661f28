"""Hostile bodies POSTed to a running HTTP front, into a handshake-era session and as
2026-07-28 requests: each one gets a clear HTTP answer (an answer with its id when it is
a request the front can read), the session goes on answering, and the process never
exits."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import attrs
import httpx2
import pytest
from harness import (
    HTTP_INIT,
    MODERN_ENVELOPE,
    POST_HEADERS,
    assern_command,
    in_session,
    make_env,
    server_table,
)
from hostile import LINES, lane_requests, owed, usable
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.e2e

PROBE = "__http_fuzz_probe__"


@attrs.define
class Front:
    process: subprocess.Popen[bytes]
    http: httpx2.Client
    url: str
    headers: dict[str, str]


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    env = make_env(tmp_path_factory.mktemp("http-front"))
    config = env.work / "config.toml"
    config.write_text(server_table("a", "--tools", "echo"))
    process = subprocess.Popen(
        [assern_command(), "serve", "--config", str(config), "--http", "0", "--no-stdio"],
        env={**env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},
        cwd=env.work,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    said = b""
    while (found := re.search(rb"serving MCP over HTTP at (\S+)", said)) is None:
        assert time.monotonic() < deadline, said.decode(errors="replace")
        assert process.poll() is None, said.decode(errors="replace")
        said += process.stderr.readline()
    url = found.group(1).decode()
    with httpx2.Client(timeout=30) as http:
        opened = http.post(url, json=HTTP_INIT, headers=POST_HEADERS)
        headers = in_session(opened.headers["mcp-session-id"])
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=note, headers=headers).status_code == 202
        try:
            yield Front(process, http, url, headers)
            assert process.poll() is None  # after every example: still running
        finally:
            process.kill()
            process.wait()
            process.stderr.close()


def answers_of(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC answers in a response: its JSON body, or its SSE stream's messages."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    if kind.startswith("text/event-stream"):
        found = []
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "result" in message or "error" in message:
                    found.append(message)
        return found
    return []


@given(lines=st.lists(LINES, min_size=1, max_size=4))
def test_every_hostile_body_gets_a_clear_answer_and_the_session_goes_on(
    front: Front, lines: list[bytes]
) -> None:
    for line in lines:
        response = front.http.post(front.url, content=line, headers=front.headers)
        seen = (line[:200], response.status_code, response.text[:300])
        assert response.status_code in (200, 202, 400), seen
        answers = answers_of(response)
        ids = owed(line)
        if response.status_code == 202:
            assert ids is None, line[:200]  # only what is owed nothing is merely accepted
        elif response.status_code == 400:
            assert [a.get("id") for a in answers] == [None]  # the transport's refusal, as JSON-RPC
        else:
            assert ids is not None, line[:200]
            [request_id] = ids
            [answer] = answers
            if usable(request_id):
                assert answer["id"] == request_id
    probe = {"jsonrpc": "2.0", "id": PROBE, "method": "ping"}
    answered = front.http.post(front.url, json=probe, headers=front.headers)
    assert answered.status_code == 200
    assert answered.json() == {"jsonrpc": "2.0", "id": PROBE, "result": {}}
    assert front.process.poll() is None


@given(lines=st.lists(st.one_of(LINES, lane_requests()), min_size=1, max_size=4))
def test_every_hostile_2026_07_28_body_gets_a_clear_answer(front: Front, lines: list[bytes]) -> None:
    # A request whose method was a JSON object once made the front fail with a 500 (a
    # membership test on an unhashable value before the SDK's models saw it).
    headers = {**POST_HEADERS, "mcp-protocol-version": "2026-07-28"}
    for line in lines:
        response = front.http.post(front.url, content=line, headers=headers)
        seen = (line[:200], response.status_code, response.text[:300])
        assert response.status_code in (200, 202, 400, 404), seen
        ids = owed(line)
        if response.status_code == 202:
            assert ids is None, seen
            continue
        [answer] = answers_of(response)
        assert "result" in answer or "error" in answer, seen
        if ids is None or ids == ["?"] or not usable(ids[0]):
            assert answer["id"] is None or response.status_code != 400, seen
        elif response.status_code == 400:  # the transport's refusal names the id it read, or none
            assert answer["id"] in (ids[0], None), seen
        else:
            assert answer["id"] == ids[0], seen
    probe = {"jsonrpc": "2.0", "id": PROBE, "method": "tools/list", "params": {"_meta": MODERN_ENVELOPE}}
    answered = front.http.post(front.url, json=probe, headers={**headers, "mcp-method": "tools/list"})
    assert answered.status_code == 200, answered.text
    assert [tool["name"] for tool in answered.json()["result"]["tools"]] == ["a_echo"]
    assert front.process.poll() is None
