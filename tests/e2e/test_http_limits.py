"""The HTTP front's locks and limits, end to end: TLS, the header-size limit, idle
sessions expiring, the instance's session limit and the per-token cap on stateless
clients. Each refusal is a clear HTTP error and one JSON log event."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
import trio
import trustme
from content import text_in
from harness import HTTP_INIT as INIT
from harness import POST_HEADERS, AssernEnv, http_front, in_session, server_table
from instances import events, wait_until
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
    ),
]

PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


async def test_tls_serves_mcp_over_https_to_clients_that_trust_its_certificate(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certificate.cert_chain_pems[0].write_to_path(str(certfile))
    certificate.private_key_pem.write_to_path(str(keyfile))
    config = write_config(
        server_table("alpha") + f'[listen]\ncertfile = "{certfile}"\nkeyfile = "{keyfile}"\n'
    )
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            assert front.url.startswith("https://127.0.0.1:")
            async with (
                httpx2.AsyncClient(verify=trusting, timeout=30) as http,
                Client(streamable_http_client(front.url, http_client=http), mode="legacy") as client,
            ):
                echoed = await client.call_tool("alpha_echo", {"text": "over tls"})
                assert text_in(echoed.content[0]) == "over tls"
            async with httpx2.AsyncClient(timeout=30) as untrusting:
                with pytest.raises(httpx2.ConnectError):  # an unknown authority: refused
                    await untrusting.post(front.url, json=INIT, headers=POST_HEADERS)
            async with httpx2.AsyncClient(timeout=30) as plain:
                with pytest.raises(httpx2.HTTPError):  # no plain HTTP on the TLS port
                    await plain.post(
                        front.url.replace("https://", "http://"), json=INIT, headers=POST_HEADERS
                    )
    listening = events(assern_env, "http_listening")
    assert listening
    assert all(event["tls"] is True for event in listening)


async def test_headers_past_the_limit_are_refused_and_the_front_serves_on(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + "[listen]\nmax_header_bytes = 2048\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            padded = {**POST_HEADERS, "x-padding": "p" * 4096}
            refused = await http.post(front.url, json=INIT, headers=padded)
            assert refused.status_code == 431
            assert "Request headers too large" in refused.json()["error"]["message"]
            # its body was never read: the client is told not to send more on that connection
            assert refused.headers["connection"] == "close"
            assert (await http.post(front.url, json=INIT, headers=POST_HEADERS)).status_code == 200
    [event] = [e for e in events(assern_env, "http_refused") if e["reason"] == "headers_too_large"]
    assert event["status"] == 431


async def test_an_idle_session_expires_and_its_id_is_then_unknown(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + "[listen]\nsession_idle_timeout = 1\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(front.url, json=INIT, headers=POST_HEADERS)
            session = opened.headers["mcp-session-id"]
            busy = await http.post(front.url, json=PING, headers=in_session(session))
            assert busy.status_code == 200  # used within the timeout: alive
            await wait_until(lambda: events(assern_env, "http_session_idle"), limit=20)
            gone = await http.post(front.url, json=PING, headers=in_session(session))
            assert gone.status_code == 404
            # a new session works at once
            assert (await http.post(front.url, json=INIT, headers=POST_HEADERS)).status_code == 200
    assert any(e["reason"] == "unknown_session" for e in events(assern_env, "http_refused"))


async def test_past_the_instance_s_session_limit_a_new_session_gets_503(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + "[listen]\nmax_sessions = 2\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            opened = [await http.post(front.url, json=INIT, headers=POST_HEADERS) for _ in range(2)]
            assert [answer.status_code for answer in opened] == [200, 200]
            full = await http.post(front.url, json=INIT, headers=POST_HEADERS)
            assert full.status_code == 503
            assert "Too many open sessions (2)" in full.json()["error"]["message"]
            # ending one session makes room
            first = opened[0].headers["mcp-session-id"]
            ended = await http.delete(front.url, headers=in_session(first))
            assert ended.status_code == 200
            # ending one session leaves the other alone
            second = opened[1].headers["mcp-session-id"]
            assert (await http.post(front.url, json=PING, headers=in_session(second))).status_code == 200
            with trio.fail_after(10):
                while (
                    again := await http.post(front.url, json=INIT, headers=POST_HEADERS)
                ).status_code != 200:
                    assert again.status_code == 503
                    await trio.sleep(0.1)
    assert any(e["reason"] == "session_limit" for e in events(assern_env, "http_refused"))


async def test_one_token_s_stateless_clients_are_capped_the_longest_idle_let_go(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    from assern.actors.listener.http.stateless import MAX_CLIENTS_PER_TOKEN

    config = write_config(server_table("alpha"))
    names = [f"agent-{n}" for n in range(MAX_CLIENTS_PER_TOKEN + 2)]
    with trio.fail_after(120):
        async with http_front(assern_env, config) as front:
            for name in names:
                info = types.Implementation(name=name, version="1")
                async with Client(front.url, mode="2026-07-28", client_info=info) as client:
                    echoed = await client.call_tool("alpha_echo", {"text": name})
                    assert text_in(echoed.content[0]) == name
            async with httpx2.AsyncClient(timeout=30) as http:
                metrics = (await http.get(front.base + "/metrics")).text
            # the first client, let go, is served again when it comes back
            info = types.Implementation(name=names[0], version="1")
            async with Client(front.url, mode="2026-07-28", client_info=info) as client:
                echoed = await client.call_tool("alpha_echo", {"text": "back"})
                assert text_in(echoed.content[0]) == "back"
    hosted = [line for line in metrics.splitlines() if line.startswith("assern_clients{")]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in hosted) == MAX_CLIENTS_PER_TOKEN
    dropped = events(assern_env, "http_stateless_client_dropped")
    # two let go for the last two names, one more when the first came back
    assert [e["client_name"] for e in dropped] == names[:3]
