"""What a daemon connection's `assern serve` keeps of its client's session, to resume it.

The resuming bridge (app/handover.py) reads every line both ways as JSON-RPC and shows
it to a `SessionRecord`, which keeps what a new daemon must be told for the session to
go on as if nothing happened, and what the client must be told when it cannot:

- the client's `initialize` request and whether it sent `notifications/initialized`
  (a 2026-07-28 client sends neither: it is stateless);
- the log level it set (`logging/setLevel`) and its resource subscriptions
  (`resources/subscribe` and `resources/unsubscribe`);
- the client's requests in flight (id, method, and the daemon connection that has it),
  and the daemon's requests to the client in flight (sampling, elicitation, roots);
- a digest of the last first page of `tools/list`, `prompts/list` and `resources/list`
  it forwarded, and the request that asked for it (asked again of a new daemon, under an
  id of the bridge's own, to tell whether the client must hear `list_changed`).

Daemon connections are told apart by a number (`link`): the bridge's first connection
is 0, each new one the next. A request in flight belongs to one link; a line of a link
that is not the request's (an old daemon's answer to a request moved on) is dropped.

A line that is not a JSON object passes unchanged: the record keeps nothing of it.

Pure logic, standard library only (it runs in the bridge after `python -I -S`).
"""

from __future__ import annotations

import json
import re

try:  # the builtin module hashlib wraps (hashlib would map OpenSSL; app/daemon/identity.py)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: The lists whose answers are kept as a digest, and the notification a change sends.
LISTS = {
    "tools/list": ("tools", "notifications/tools/list_changed"),
    "prompts/list": ("prompts", "notifications/prompts/list_changed"),
    "resources/list": ("resources", "notifications/resources/list_changed"),
    "resources/templates/list": ("resourceTemplates", "notifications/resources/list_changed"),
}
#: The answers `on_answer` is shown (app/first_answers.py keeps them).
KEPT = frozenset({"initialize", *LISTS})
#: Requests that change nothing and hold no answer worth keeping: moved to a new daemon
#: (sent again there under the client's own id) instead of failed.
MOVED = frozenset({"subscriptions/listen"})
#: The error code of a request whose daemon stopped under it (JSON-RPC's internal error).
LOST_CODE = -32603
LOST_MESSAGE = "the assern daemon stopped while this request ran; it was not retried"
#: The prefix of the ids the bridge's own requests use (never forwarded to the client).
OWN_PREFIX = "assern-handover-"

#: Dropped, not forwarded anywhere.
DROP = -1
#: The head of an answer as the daemon writes it; such a line is not parsed whole.
_RESPONSE_HEAD = re.compile(rb'\{"jsonrpc":\s*"2\.0",\s*"id":\s*(-?\d+|"[^"\\]*")\s*,\s*"(?:result|error)"')


def _key(ident: object) -> int | str | None:
    """A request id as a dictionary key (`1` and `"1"` differ as keys); None for no
    valid id."""
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return None
    return ident


def digest(result: object, field: str) -> str | None:
    """The digest of a list answer's `field` (the tools, prompts or resources), None when
    the answer has no such list."""
    if not isinstance(result, dict) or not isinstance(result.get(field), list):
        return None
    text = json.dumps(result[field], sort_keys=True, separators=(",", ":"))
    return blake2b(text.encode(), digest_size=16).hexdigest()


def line_of(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as a newline-ended line."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def lost_error(ident: object, message: str = LOST_MESSAGE) -> bytes:
    """The error a client's request gets when its daemon stopped under it."""
    return line_of({"jsonrpc": "2.0", "id": ident, "error": {"code": LOST_CODE, "message": message}})


def _head_id(found: bytes) -> int | str | None:
    """The id `_RESPONSE_HEAD` found: digits, or a string with no escape (read as
    json.loads reads them, without its machinery: this runs for every answer); None
    for a string that is not UTF-8."""
    if found[:1] != b'"':
        return int(found)
    try:
        return found[1:-1].decode()
    except ValueError:
        return None


#: json's own scanner for one value (what json.loads runs under its checks); read
#: through `_parse` for every line that crosses the bridge
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by its __init__


def _parse(line: bytes) -> dict[str, Any] | None:
    """The line's JSON object, as json.loads reads it; None for anything else. A line
    that is one value and its newline is scanned directly; any other (whitespace before
    or after it, a byte that is not UTF-8, no valid value) goes to json.loads."""
    try:
        text = line.decode()
        message, end = _SCAN(text, 0)
        if text[end:] not in ("\n", ""):
            raise ValueError(end)
    except (StopIteration, ValueError):
        try:
            message = json.loads(line)
        except ValueError:
            return None
    return message if isinstance(message, dict) else None


class SessionRecord:
    """A session as the bridge saw it (see the module). Not thread-safe: one loop uses it."""

    def __init__(self) -> None:
        self.initialize: dict[str, Any] | None = None
        self.initialized = False
        self.log_level: str | None = None
        self.subscriptions: dict[str, None] = {}  # ordered set of URIs
        #: client request id -> [id, method, link, the request message]
        self.client_requests: dict[int | str, list[Any]] = {}
        #: daemon request id -> link
        self.daemon_requests: dict[int | str, int] = {}
        #: ids of requests of daemons that are gone: the client's answers are dropped
        self.dead_daemon_requests: set[int | str] = set()
        #: list method -> (digest, the client's request that got it)
        self.lists: dict[str, tuple[str, dict[str, Any]]] = {}
        #: own request id -> what it was for (a method)
        self.own: dict[int | str, str] = {}
        self._own_count = 0
        self.superseded: dict[str, Any] | None = None
        #: the `_meta` of the client's last request (a 2026-07-28 client's carries its
        #: protocol version, which every request of that era must)
        self.meta: dict[str, Any] | None = None
        #: shown each daemon answer to the client's `initialize` and lists (method, the
        #: client's request, the result), when set
        self.on_answer: Callable[[str, dict[str, Any], object], None] | None = None

    # ------------------------------------------------------------------ from the client

    def from_client(self, line: bytes, link: int) -> int:
        """Record a client's line; the link it goes to (DROP: nowhere)."""
        message = _parse(line)
        if message is None:
            return link
        method = message.get("method")
        key = _key(message.get("id"))
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if key is not None:
                self._client_request(key, method, params, message, link)
                return link
            if method == "notifications/initialized":
                self.initialized = True
            elif method == "notifications/cancelled":
                cancelled = _key(params.get("requestId"))
                held = None if cancelled is None else self.client_requests.get(cancelled)
                if held is not None:
                    return int(held[2])
            return link
        if key is None:
            return link
        if key in self.daemon_requests:
            return self.daemon_requests.pop(key)
        if key in self.dead_daemon_requests:
            self.dead_daemon_requests.discard(key)
            return DROP
        return link

    def _client_request(
        self, key: int | str, method: str, params: dict[str, Any], message: dict[str, Any], link: int
    ) -> None:
        if method == "initialize":
            self.initialize = message
        elif method == "logging/setLevel" and isinstance(params.get("level"), str):
            self.log_level = params["level"]
        elif method == "resources/subscribe" and isinstance(params.get("uri"), str):
            self.subscriptions[params["uri"]] = None
        elif method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
            self.subscriptions.pop(params["uri"], None)
        self.client_requests[key] = [message.get("id"), method, link, message]
        if isinstance(params.get("_meta"), dict):
            self.meta = params["_meta"]

    # ------------------------------------------------------------------ from a daemon

    def from_daemon(self, line: bytes, link: int) -> bool | tuple[str, object]:
        """Record a daemon's line: whether it goes on to the client, or, for the answer
        to one of the bridge's own requests, its method and result (never forwarded).

        An answer is not parsed whole unless it is a list's or the bridge's own: its id
        is read from the head of the line as the daemon writes it
        (`{"jsonrpc":"2.0","id":...,"result"`); a line with any other head is parsed."""
        head = _RESPONSE_HEAD.match(line)
        ident = None if head is None else _head_id(head.group(1))
        if ident is not None:
            return self._answer(ident, line, None, link)
        message = _parse(line)
        if message is None:
            return True
        method = message.get("method")
        ident = _key(message.get("id"))
        if not isinstance(method, str):
            return True if ident is None else self._answer(ident, line, message, link)
        if ident is not None:
            self.daemon_requests[ident] = link
            self.dead_daemon_requests.discard(ident)  # a new daemon's request of that id
            return True
        if method == "assern/superseded":
            params = message.get("params")
            self.superseded = params if isinstance(params, dict) else {}
            return False
        return True

    def _answer(
        self, ident: int | str, line: bytes, message: dict[str, Any] | None, link: int
    ) -> bool | tuple[str, object]:
        """An answer of daemon `link` to request `ident` (`message`: parsed, if it was)."""
        if ident in self.own:
            whole = message if message is not None else _parse(line)
            return self.own.pop(ident), (whole or {}).get("result")
        held = self.client_requests.get(ident)
        if held is None:
            return True
        if held[2] != link:
            return False  # an old daemon's answer to a request moved on
        del self.client_requests[ident]
        if held[1] in KEPT:
            whole = message if message is not None else _parse(line)
            result = (whole or {}).get("result")
            if held[1] in LISTS:
                self._keep_list(held[1], held[3], result)
            if self.on_answer is not None and result is not None:
                self.on_answer(held[1], held[3], result)
        return True

    def answered_early(self, message: dict[str, Any], result: object) -> None:
        """A client's request (`initialize`, a list, `ping`) the bridge answered itself
        before any daemon was joined (app/first_answers.py): kept as if a daemon had."""
        method = message.get("method")
        if method == "initialize":
            self.initialize = message
        elif method in LISTS:
            self._keep_list(method, message, result)

    def _keep_list(self, method: str, request: dict[str, Any], result: object) -> None:
        params = request.get("params")
        if isinstance(params, dict) and params.get("cursor") is not None:
            return
        found = digest(result, LISTS[method][0])
        if found is not None:
            self.lists[method] = (found, request)

    def changed(self, method: str, result: object) -> bytes | None:
        """The `list_changed` notification the client must get when a new daemon's answer
        to `method` differs from what it was given (recorded as given from now on)."""
        kept = self.lists.get(method)
        if kept is None or method not in LISTS:
            return None
        field, notification = LISTS[method]
        found = digest(result, field)
        if found is None or found == kept[0]:
            return None
        self.lists[method] = (found, kept[1])
        return line_of({"jsonrpc": "2.0", "method": notification})

    # ------------------------------------------------------------------ a daemon is gone

    def lost(self, link: int) -> list[bytes]:
        """A daemon connection is gone: the errors its requests in flight get (the ones
        MOVED are not failed: `replay` sends them again), and its requests to the client
        are marked dead (the client's answers to them are dropped)."""
        errors = []
        for key, (ident, method, held_link, _message) in list(self.client_requests.items()):
            if held_link == link and method not in MOVED:
                del self.client_requests[key]
                errors.append(lost_error(ident))
        for key, held in list(self.daemon_requests.items()):
            if held == link:
                del self.daemon_requests[key]
                self.dead_daemon_requests.add(key)
        return errors

    def fail_all(self, message: str) -> list[bytes]:
        """Every client request in flight, failed with `message` (no daemon to resume on)."""
        errors = [lost_error(ident, message) for ident, *_ in self.client_requests.values()]
        self.client_requests.clear()
        return errors

    def waiting(self, link: int) -> int:
        """The client's requests waiting for an answer on `link`."""
        if not self.client_requests:
            return 0  # the bridge asks after every line: mostly when nothing waits
        return sum(1 for held in self.client_requests.values() if held[2] == link)

    def in_flight(self, link: int) -> int:
        """Requests either way still open on `link`."""
        mine = sum(1 for held in self.client_requests.values() if held[2] == link)
        return mine + sum(1 for held in self.daemon_requests.values() if held == link)

    # ------------------------------------------------------------------ replay

    def own_request(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        """A request of the bridge's own (its answer is never forwarded)."""
        self._own_count += 1
        ident = f"{OWN_PREFIX}{self._own_count}"
        self.own[ident] = method
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        return line_of(message)

    def probe(self) -> bytes:
        """A request of the bridge's own that any daemon answers at once, whatever it is
        busy with: `ping` in a session that was initialized, `server/discover` (with the
        client's `_meta`) for a 2026-07-28 client, whose era has no `ping`."""
        if self.initialize is not None or self.meta is None:
            return self.own_request("ping")
        return self.own_request("server/discover", {"_meta": self.meta})

    def initialize_line(self) -> bytes | None:
        """The client's `initialize`, under an id of the bridge's own; None for a client
        that sent none (2026-07-28)."""
        if self.initialize is None:
            return None
        params = self.initialize.get("params")
        return self.own_request("initialize", params if isinstance(params, dict) else {})

    def replay(self, link: int) -> list[bytes]:
        """What a new daemon (connection `link`) is sent after the `initialize` answer:
        `notifications/initialized`, the log level, the subscriptions, the lists asked
        again (under the bridge's own ids), and the requests MOVED (under their own)."""
        lines = []
        if self.initialized:
            lines.append(line_of({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        if self.log_level is not None:
            lines.append(self.own_request("logging/setLevel", {"level": self.log_level}))
        lines.extend(self.own_request("resources/subscribe", {"uri": uri}) for uri in self.subscriptions)
        for method, (_digest, request) in self.lists.items():
            params = request.get("params")
            lines.append(self.own_request(method, params if isinstance(params, dict) else None))
        for held in self.client_requests.values():
            if held[1] in MOVED and held[2] != link:
                held[2] = link
                lines.append(line_of(held[3]))
        return lines
