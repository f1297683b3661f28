"""The checks every request to the status page passes."""

from __future__ import annotations

import pytest

from assern.actors.listener.page.guard import CSP, check, cookie_of, loopback, set_cookie

PORT = 4321


def reason(method: str = "GET", peer: str | None = "127.0.0.1", **headers: str) -> str | None:
    refusal = check(method, {"host": f"127.0.0.1:{PORT}", **headers}, peer, PORT)
    return None if refusal is None else refusal.reason


def test_the_page_itself_passes() -> None:
    assert reason() is None
    assert reason(host=f"localhost:{PORT}") is None
    assert reason(origin=f"http://127.0.0.1:{PORT}") is None
    assert reason(origin=f"http://localhost:{PORT}") is None
    assert reason(peer="::1") is None


@pytest.mark.parametrize(
    "host", ["evil.example:4321", "127.0.0.1", "127.0.0.1:80", "localhost", "127.0.0.1:4321.evil", ""]
)
def test_a_foreign_host_is_refused(host: str) -> None:
    assert reason(host=host) == "bad_host"


def test_no_host_is_refused() -> None:
    refusal = check("GET", {}, "127.0.0.1", PORT)
    assert refusal is not None
    assert (refusal.status, refusal.reason) == (421, "bad_host")


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://127.0.0.1:9999", "https://127.0.0.1:4321", "null"]
)
def test_a_foreign_origin_is_refused(origin: str) -> None:
    assert reason(origin=origin) == "bad_origin"


@pytest.mark.parametrize("peer", ["192.168.1.5", "10.0.0.1", None, "not an address"])
def test_anything_but_loopback_is_refused(peer: str | None) -> None:
    assert reason(peer=peer) == "not_loopback"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "HEAD"])
def test_the_page_is_read_only(method: str) -> None:
    assert reason(method) == "bad_method"


def test_loopback() -> None:
    assert loopback("127.0.0.2")
    assert loopback("::1")
    assert not loopback("0.0.0.0")


def test_the_cookie() -> None:
    assert cookie_of("a=1; assern_page=XYZ; b=2") == "XYZ"
    assert cookie_of("assern_page=") is None
    assert cookie_of("other=XYZ") is None
    assert cookie_of(None) is None
    made = set_cookie("XYZ")
    assert made.startswith("assern_page=XYZ;")
    assert "HttpOnly" in made
    assert "SameSite=Strict" in made
    assert "Max-Age" not in made  # gone when the browser closes


def test_the_policy_allows_nothing_from_elsewhere() -> None:
    assert "default-src 'none'" in CSP
    assert "'unsafe-inline'" not in CSP
    assert "frame-ancestors 'none'" in CSP
