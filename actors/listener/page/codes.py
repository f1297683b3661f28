"""The status page's keys: one-time codes and the cookies they are exchanged for.

`assernctl web` asks the instance for a code (the control socket's `web` command); the
browser brings it once to `/login?code=…`, which answers with a cookie and a redirect
to the page's clean address. A code works once and only for `CODE_TTL` seconds; a
cookie works until the instance stops (at most `MAX_SESSIONS` at once, the oldest
forgotten first). Only SHA-256 digests of either are kept, so a lookup compares
digests, never the secret itself (no timing leak), and nothing here holds a key that
a memory dump could replay after it was used.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

#: Seconds a code minted by `assernctl web` stays valid.
CODE_TTL = 120.0
#: Codes waiting to be used at most (the oldest is dropped first).
MAX_CODES = 16
#: Signed-in browsers at most (the oldest is forgotten first).
MAX_SESSIONS = 32


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()


class Keys:
    """The codes minted and not yet used, and the cookies given for used ones.

    Args:
        clock: Seconds of a monotonic clock (codes expire on it).
        ttl: How long a code stays valid.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = CODE_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._codes: OrderedDict[bytes, float] = OrderedDict()  # digest -> expiry
        self._sessions: OrderedDict[bytes, None] = OrderedDict()

    @property
    def ttl(self) -> float:
        """Seconds a code stays valid."""
        return self._ttl

    def mint(self) -> str:
        """A new one-time code (43 URL-safe characters: 256 random bits)."""
        now = self._clock()
        for digest, expiry in list(self._codes.items()):
            if expiry <= now:
                del self._codes[digest]
        while len(self._codes) >= MAX_CODES:
            self._codes.popitem(last=False)
        code = secrets.token_urlsafe(32)
        self._codes[_digest(code)] = now + self._ttl
        return code

    def redeem(self, code: str) -> str | None:
        """The cookie value for `code`, which is used up; None for a code that is
        unknown, already used or expired."""
        expiry = self._codes.pop(_digest(code), None)
        if expiry is None or expiry <= self._clock():
            return None
        token = secrets.token_urlsafe(32)
        self._sessions[_digest(token)] = None
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return token

    def admits(self, token: str | None) -> bool:
        """Whether `token` is the cookie of a signed-in browser."""
        return token is not None and _digest(token) in self._sessions
