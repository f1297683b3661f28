"""`[listen]` addresses, and the Host, Origin and token checks of every request."""

from __future__ import annotations

from pathlib import Path

import pytest

from assern.actors.config.listen import Bind, BindError, ListenSpec, listen_problems, parse_bind
from assern.actors.listener.http.checks import authenticate, check_header_size, check_host_origin
from assern.actors.listener.http.refusal import Refusal
from assern.actors.listener.http.tokens import TokenStore


@pytest.mark.parametrize(
    ("text", "bind"),
    [
        ("8765", Bind("127.0.0.1", 8765)),
        ("0", Bind("127.0.0.1", 0)),
        ("0.0.0.0:80", Bind("0.0.0.0", 80)),
        ("localhost:9", Bind("localhost", 9)),
        ("[::1]:8765", Bind("::1", 8765)),
        (" 10.0.0.2:1 ", Bind("10.0.0.2", 1)),
    ],
)
def test_addresses(text: str, bind: Bind) -> None:
    assert parse_bind(text) == bind


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("::1:8765", "in brackets"),
        ("[::1]8765", "[ADDRESS]:PORT"),
        (":8765", "no host"),
        ("host:http", "port from 0 to 65535"),
        ("70000", "port from 0 to 65535"),
        ("", "port from 0 to 65535"),
    ],
)
def test_bad_addresses_say_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(BindError, match=says.replace("[", r"\[").replace("]", r"\]")):
        parse_bind(text)


def test_loopback_is_only_this_machine() -> None:
    assert Bind("127.0.0.1", 1).loopback
    assert Bind("::1", 1).loopback
    assert Bind("localhost", 1).loopback
    assert not Bind("0.0.0.0", 1).loopback
    assert not Bind("example.com", 1).loopback
    assert str(Bind("::1", 8)) == "[::1]:8"


def test_a_public_address_without_authentication_is_refused() -> None:
    [(key, problem)] = listen_problems(ListenSpec(http=Bind("0.0.0.0", 80), auth="none"))
    assert key == "auth"
    assert "without authentication is refused" in problem
    assert listen_problems(ListenSpec(http=Bind("0.0.0.0", 80))) == []  # auto: a token is required
    assert listen_problems(ListenSpec(http=Bind("127.0.0.1", 80), auth="none")) == []
    [(key, _)] = listen_problems(ListenSpec(certfile=Path("c.pem")))
    assert key == "keyfile"


def test_when_a_token_is_needed() -> None:
    local, public = ListenSpec(http=Bind("127.0.0.1", 1)), ListenSpec(http=Bind("0.0.0.0", 1))
    assert not local.needs_token(tokens_exist=False)
    assert local.needs_token(tokens_exist=True)  # once a token exists, loopback asks too
    assert public.needs_token(tokens_exist=False)
    assert ListenSpec(auth="token").needs_token(tokens_exist=False)
    assert not ListenSpec(auth="none").needs_token(tokens_exist=True)


LOCAL = Bind("127.0.0.1", 8765)


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "127.0.0.1:8765"},
        {"host": "localhost:9999"},
        {"host": "[::1]:8765", "origin": "http://localhost:3000"},
        {"host": "127.0.0.1", "origin": "https://127.0.0.1"},
    ],
)
def test_local_names_pass(headers: dict[str, str]) -> None:
    assert check_host_origin(headers, LOCAL, ListenSpec()) is None


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example:8765"}, 421),  # DNS rebinding: a foreign name for 127.0.0.1
        ({}, 421),
        ({"host": "127.0.0.1:8765", "origin": "http://evil.example"}, 403),
        ({"host": "127.0.0.1:8765", "origin": "http://localhost.evil.example"}, 403),
    ],
)
def test_foreign_names_are_refused(headers: dict[str, str], status: int) -> None:
    refusal = check_host_origin(headers, LOCAL, ListenSpec())
    assert refusal is not None
    assert refusal.status == status


def test_configured_names_pass() -> None:
    spec = ListenSpec(allowed_hosts=("mcp.internal:*",), allowed_origins=("https://app.example",))
    assert (
        check_host_origin({"host": "mcp.internal:443", "origin": "https://app.example"}, LOCAL, spec) is None
    )
    public = Bind("0.0.0.0", 80)
    assert check_host_origin({"host": "anything"}, public, ListenSpec()) is None  # tokens guard it
    refusal = check_host_origin({"host": "other"}, public, ListenSpec(allowed_hosts=("mcp.example",)))
    assert refusal is not None
    assert refusal.status == 421


def test_authentication(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.toml")
    spec = ListenSpec(http=LOCAL)
    assert authenticate({}, store, spec) is None  # loopback, no token yet: open
    token = store.create("ci")
    assert authenticate({"authorization": f"Bearer {token}"}, store, spec) == "ci"
    assert authenticate({"authorization": f"bearer {token}"}, store, spec) == "ci"
    for headers, reason in (
        ({}, "no_token"),
        ({"authorization": token}, "bad_token"),
        ({"authorization": f"Basic {token}"}, "bad_token"),
        ({"authorization": "Bearer asn_other"}, "bad_token"),
    ):
        refusal = authenticate(headers, store, spec)
        assert isinstance(refusal, Refusal)
        assert refusal.status == 401
        assert refusal.reason == reason
        assert ("www-authenticate", 'Bearer realm="assern"') in refusal.headers
        assert token not in refusal.message


def test_headers_are_measured_as_sent() -> None:
    headers = [(b"host", b"127.0.0.1"), (b"x-pad", b"p" * 100)]
    size = 4 + 9 + 4 + 5 + 100 + 4
    assert check_header_size(headers, size) is None
    refused = check_header_size(headers, size - 1)
    assert refused is not None
    assert (refused.status, refused.reason) == (431, "headers_too_large")
    assert f"({size} bytes; at most {size - 1})" in refused.message
