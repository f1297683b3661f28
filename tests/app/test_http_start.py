"""When `assern serve --http` refuses to start for want of a token (the end-to-end test is
in tests/e2e/test_http_front.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assern.actors.config.listen import Bind, ListenSpec
from assern.actors.listener.http.tokens import TokenStore
from assern.app.cli import _no_token_yet

if TYPE_CHECKING:
    from pathlib import Path


def test_off_loopback_a_start_waits_for_a_token_and_on_loopback_it_does_not(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    public = ListenSpec(http=Bind("0.0.0.0", 8765), tokens_file=tokens)
    refused = _no_token_yet(public)
    assert refused is not None
    assert refused.startswith("serving 0.0.0.0:8765 (not a loopback address) needs a bearer token")
    assert f"none exists in {tokens}" in refused
    assert "`assernctl token create NAME`" in refused
    assert _no_token_yet(ListenSpec(http=Bind("0.0.0.0", 8765), tokens_file=tokens, auth="token"))
    assert _no_token_yet(ListenSpec(http=Bind("127.0.0.1", 8765), tokens_file=tokens)) is None
    TokenStore(tokens).create("remote")
    assert _no_token_yet(public) is None


def test_an_unreadable_token_file_is_said_so(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text("[tokens.a]\nsha256 = 1\n")
    refused = _no_token_yet(ListenSpec(http=Bind("192.0.2.1", 8765), tokens_file=tokens))
    assert refused is not None
    assert "its token file cannot be read" in refused
    assert "tokens.a.sha256: expected a SHA-256 hex digest" in refused
