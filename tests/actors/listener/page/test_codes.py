"""One-time codes and the cookies they become."""

from __future__ import annotations

from assern.actors.listener.page.codes import MAX_CODES, MAX_SESSIONS, Keys


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_code_signs_in_once() -> None:
    keys = Keys(Clock())
    code = keys.mint()
    token = keys.redeem(code)
    assert token is not None
    assert keys.admits(token)
    assert keys.redeem(code) is None  # used up
    assert not keys.admits(code)  # a code is no cookie


def test_wrong_and_missing_keys_are_refused() -> None:
    keys = Keys(Clock())
    keys.mint()
    assert keys.redeem("not-a-code") is None
    assert keys.redeem("") is None
    assert not keys.admits(None)
    assert not keys.admits("not-a-cookie")


def test_a_code_expires() -> None:
    clock = Clock()
    keys = Keys(clock, ttl=60.0)
    code = keys.mint()
    clock.now += 60.0
    assert keys.redeem(code) is None
    fresh = keys.mint()
    clock.now += 59.0
    assert keys.redeem(fresh) is not None


def test_codes_and_cookies_are_bounded_oldest_first() -> None:
    keys = Keys(Clock())
    codes = [keys.mint() for _ in range(MAX_CODES + 1)]
    assert keys.redeem(codes[0]) is None  # dropped to make room
    tokens = [keys.redeem(code) for code in codes[1:]]
    tokens += [keys.redeem(keys.mint()) for _ in range(MAX_SESSIONS)]
    assert not keys.admits(tokens[0])  # the oldest browser is forgotten
    assert keys.admits(tokens[-1])
    assert len({*tokens}) == len(tokens)  # every cookie is its own


def test_codes_are_long_random_and_url_safe() -> None:
    keys = Keys(Clock())
    code = keys.mint()
    assert len(code) == 43
    assert code.replace("-", "").replace("_", "").isalnum()
    assert code != keys.mint()
