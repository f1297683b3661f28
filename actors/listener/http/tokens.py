"""Bearer tokens of the HTTP front: created once, stored as hashes, checked in constant time.

`assernctl token create NAME` draws a random token, prints it once and stores only its
SHA-256 in the token file (0600, replaced atomically); `list` shows names, creation
times and each token's first characters (enough to recognise it, useless to use it);
`revoke` removes one. The running front re-reads the file when it changes, so a revoked
token stops working with the next request and a created one works without a restart.
A token is 256 random bits, so one SHA-256 is all its hash needs; every stored hash is
compared (`hmac.compare_digest`) whatever matched, so timing says nothing about which.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
import tomllib
from typing import TYPE_CHECKING

import attrs
import tomli_w

if TYPE_CHECKING:
    from pathlib import Path

#: What every token starts with (so a leaked one is recognisable in a scanner's rules).
PREFIX = "asn_"
#: How many characters of a token `list` shows.
SHOWN = len(PREFIX) + 6
_HEADER = "# assern HTTP bearer tokens: SHA-256 hashes only (assernctl token create|list|revoke)\n"


class TokenError(Exception):
    """The token file cannot be read or written, or a name is wrong."""


@attrs.frozen(kw_only=True)
class TokenInfo:
    name: str
    created: str
    shown: str
    sha256: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _parse(text: str, path: Path) -> dict[str, TokenInfo]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TokenError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("tokens", {})
    if not isinstance(table, dict):
        raise TokenError(f"{path}: expected a [tokens.NAME] table per token")
    found = {}
    for name, entry in table.items():
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or len(digest) != 64:
            raise TokenError(f"{path}: tokens.{name}.sha256: expected a SHA-256 hex digest")
        found[name] = TokenInfo(
            name=name,
            created=str(entry.get("created", "")),
            shown=str(entry.get("shown", "")),
            sha256=digest.lower(),
        )
    return found


class TokenStore:
    """The token file: read on change, written atomically with mode 0600."""

    def __init__(self, path: Path | None) -> None:
        #: None: no token file (no token exists, none can be created)
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._tokens: dict[str, TokenInfo] = {}
        self._error: str | None = None

    # ------------------------------------------------------------------ reading

    def tokens(self) -> dict[str, TokenInfo]:
        """The stored tokens by name (re-read when the file changed).

        Raises:
            TokenError: the file exists but cannot be read as a token file.
        """
        self._refresh()
        if self._error is not None:
            raise TokenError(self._error)
        return dict(self._tokens)

    def any(self) -> bool:
        """Whether at least one token exists (an unreadable file counts: fail closed)."""
        self._refresh()
        return self._error is not None or bool(self._tokens)

    def check(self, presented: str) -> str | None:
        """The name of the token `presented` is, or None (also when the file is unreadable)."""
        self._refresh()
        digest = token_hash(presented)
        found = None
        for info in self._tokens.values():
            if hmac.compare_digest(digest, info.sha256):
                found = info.name
        return found

    def _refresh(self) -> None:
        if self.path is None:
            return
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._tokens, self._error = None, {}, None
            return
        except OSError as exc:
            self._stamp, self._tokens, self._error = None, {}, f"{self.path}: {exc.strerror}"
            return
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp == self._stamp:
            return
        try:
            self._tokens, self._error = _parse(self.path.read_text(encoding="utf-8"), self.path), None
        except (OSError, UnicodeDecodeError) as exc:
            self._tokens, self._error = {}, f"{self.path}: cannot read: {exc}"
        except TokenError as exc:
            self._tokens, self._error = {}, str(exc)
        self._stamp = stamp

    # ------------------------------------------------------------------ writing

    def create(self, name: str) -> str:
        """A new token called `name`; only its hash is stored. Returns the token.

        Raises:
            TokenError: the name is taken or unusable, or the file cannot be written.
        """
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise TokenError(f"token names are letters, digits, '-', '_' and '.', got {name!r}")
        tokens = self.tokens()
        if name in tokens:
            raise TokenError(f"a token named {name!r} exists: revoke it first or choose another name")
        token = PREFIX + secrets.token_urlsafe(32)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tokens[name] = TokenInfo(name=name, created=created, shown=token[:SHOWN], sha256=token_hash(token))
        self._write(tokens)
        return token

    def revoke(self, name: str) -> bool:
        """Remove the token called `name`; False when there is none."""
        tokens = self.tokens()
        if tokens.pop(name, None) is None:
            return False
        self._write(tokens)
        return True

    def _write(self, tokens: dict[str, TokenInfo]) -> None:
        table = {
            info.name: {"sha256": info.sha256, "created": info.created, "shown": info.shown}
            for info in tokens.values()
        }
        text = _HEADER + tomli_w.dumps({"tokens": table})
        if self.path is None:
            raise TokenError("no token file is configured")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise TokenError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self._stamp = None
