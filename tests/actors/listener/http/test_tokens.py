"""The token file: hashes only, 0600, re-read when it changes, closed when unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from assern.actors.listener.http.tokens import PREFIX, TokenError, TokenStore, token_hash


def test_a_created_token_is_stored_as_its_hash_only(tmp_path: Path) -> None:
    path = tmp_path / "home" / "tokens.toml"
    store = TokenStore(path)
    token = store.create("laptop")
    assert token.startswith(PREFIX)
    assert len(token) >= 40
    text = path.read_text()
    assert token not in text
    assert token_hash(token) in text
    assert path.stat().st_mode & 0o777 == 0o600
    assert store.check(token) == "laptop"
    assert store.check(token + "x") is None
    [info] = store.tokens().values()
    assert info.name == "laptop"
    assert token.startswith(info.shown)
    assert len(info.shown) < 16


def test_each_token_is_new(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.toml")
    tokens = {store.create(f"t{i}") for i in range(5)}
    assert len(tokens) == 5
    assert {store.check(t) for t in tokens} == {f"t{i}" for i in range(5)}


def test_names_are_checked(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.toml")
    store.create("ci")
    with pytest.raises(TokenError, match="exists"):
        store.create("ci")
    for bad in ("", "has space", "a/b", "x=y"):
        with pytest.raises(TokenError, match="letters, digits"):
            store.create(bad)


def test_another_process_s_changes_are_seen(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    running, ctl = TokenStore(path), TokenStore(path)
    assert not running.any()
    token = ctl.create("ci")
    assert running.check(token) == "ci"
    assert ctl.revoke("ci")
    assert not ctl.revoke("ci")
    assert running.check(token) is None
    assert not running.any()


def test_an_unreadable_file_lets_nobody_in(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    store = TokenStore(path)
    token = store.create("ci")
    path.write_text("[tokens.ci]\nsha256 = 'short'\n")
    assert store.any()  # a token is still required...
    assert store.check(token) is None  # ...and none is accepted
    with pytest.raises(TokenError, match=r"tokens\.ci\.sha256"):
        store.tokens()
    path.write_text("not = [toml")
    with pytest.raises(TokenError, match="not valid TOML"):
        store.tokens()


def test_without_a_file_there_are_no_tokens(tmp_path: Path) -> None:
    store = TokenStore(None)
    assert not store.any()
    assert store.check("asn_x") is None
    with pytest.raises(TokenError, match="no token file"):
        store.create("ci")
