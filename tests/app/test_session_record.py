"""What the resuming bridge keeps of a session, from which message, and what it replays."""

from __future__ import annotations

import json
from typing import Any

from assern.app.session_record import DROP, LOST_MESSAGE, OWN_PREFIX, SessionRecord, digest, lost_error


def line(**message: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n"


def parsed(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(x) for x in lines]


INIT = {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "c"}}
TOOLS = {"tools": [{"name": "alpha_echo", "inputSchema": {"type": "object"}}]}


def initialized_session() -> SessionRecord:
    record = SessionRecord()
    assert record.from_client(line(id=0, method="initialize", params=INIT), 0) == 0
    assert record.from_daemon(line(id=0, result={"capabilities": {}}), 0)
    record.from_client(line(method="notifications/initialized"), 0)
    return record


def test_the_handshake_log_level_and_subscriptions_are_kept() -> None:
    record = initialized_session()
    record.from_client(line(id=1, method="logging/setLevel", params={"level": "debug"}), 0)
    for n, uri in enumerate(("a://1", "a://2", "a://3")):
        record.from_client(line(id=10 + n, method="resources/subscribe", params={"uri": uri}), 0)
    record.from_client(line(id=20, method="resources/unsubscribe", params={"uri": "a://2"}), 0)
    assert record.initialize is not None
    assert record.initialize["params"] == INIT
    assert record.initialized
    assert record.log_level == "debug"
    assert list(record.subscriptions) == ["a://1", "a://3"]


def test_requests_in_flight_are_counted_until_answered_on_their_own_link() -> None:
    record = initialized_session()
    record.from_client(line(id=5, method="tools/call", params={"name": "x"}), 0)
    record.from_client(line(id="s", method="tools/call", params={"name": "y"}), 0)
    assert record.waiting(0) == 2
    assert record.from_daemon(line(id=5, result={}), 0)
    assert record.waiting(0) == 1
    # an answer of another link to a request it does not hold goes nowhere
    assert record.from_daemon(line(id="s", result={}), 1) is False
    assert record.waiting(0) == 1


def test_a_lost_daemon_fails_its_requests_once_and_drops_the_clients_answers_to_it() -> None:
    record = initialized_session()
    record.from_client(line(id=5, method="tools/call", params={"name": "x"}), 0)
    assert record.from_daemon(line(id=0, method="sampling/createMessage", params={}), 0)
    errors = parsed(record.lost(0))
    assert errors == [{"jsonrpc": "2.0", "id": 5, "error": {"code": -32603, "message": LOST_MESSAGE}}]
    assert record.lost(0) == []  # never twice
    assert record.from_client(line(id=0, result={"content": {}}), 1) == DROP
    # a new daemon's request of the same id is answered to the new daemon
    assert record.from_daemon(line(id=7, method="roots/list"), 1)
    assert record.from_client(line(id=7, result={"roots": []}), 1) == 1


def test_a_cancellation_follows_its_request_to_the_link_that_holds_it() -> None:
    record = initialized_session()
    record.from_client(line(id=5, method="tools/call", params={"name": "x"}), 0)
    cancel = line(method="notifications/cancelled", params={"requestId": 5})
    assert record.from_client(cancel, 1) == 0


def test_replay_sends_the_handshake_state_and_lists_under_own_ids() -> None:
    record = initialized_session()
    record.from_client(line(id=1, method="logging/setLevel", params={"level": "info"}), 0)
    record.from_client(line(id=2, method="resources/subscribe", params={"uri": "a://1"}), 0)
    record.from_client(line(id=3, method="tools/list", params={}), 0)
    record.from_daemon(line(id=3, result=TOOLS), 0)
    record.from_client(line(id=4, method="subscriptions/listen", params={"filter": {}}), 0)
    record.lost(0)
    first = record.initialize_line()
    assert first is not None
    init = json.loads(first)
    assert init["method"] == "initialize"
    assert init["params"] == INIT
    assert init["id"].startswith(OWN_PREFIX)
    sent = parsed(record.replay(1))
    assert [m.get("method") for m in sent] == [
        "notifications/initialized",
        "logging/setLevel",
        "resources/subscribe",
        "tools/list",
        "subscriptions/listen",
    ]
    assert all(str(m["id"]).startswith(OWN_PREFIX) for m in sent[1:4])
    assert sent[4]["id"] == 4  # a listen stream moves under the client's own id
    assert record.waiting(1) == 1


def test_own_answers_are_swallowed_and_a_changed_list_says_list_changed() -> None:
    record = initialized_session()
    record.from_client(line(id=3, method="tools/list"), 0)
    record.from_daemon(line(id=3, result=TOOLS), 0)
    record.lost(0)
    record.initialize_line()
    sent = parsed(record.replay(1))
    ident = sent[-1]["id"]
    same = line(id=ident, result=TOOLS)
    answer = record.from_daemon(same, 1)
    assert answer == ("tools/list", TOOLS)
    assert record.changed(*answer) is None
    more = {"tools": [*TOOLS["tools"], {"name": "gamma_echo", "inputSchema": {"type": "object"}}]}
    notice = record.changed("tools/list", more)
    assert notice is not None
    assert json.loads(notice) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    assert record.changed("tools/list", more) is None  # told once


def test_a_later_page_is_not_kept_as_the_list() -> None:
    record = initialized_session()
    record.from_client(line(id=3, method="tools/list", params={"cursor": "p2"}), 0)
    record.from_daemon(line(id=3, result=TOOLS), 0)
    assert record.lists == {}


def test_a_2026_client_has_no_initialize_to_replay() -> None:
    record = SessionRecord()
    record.from_client(line(id=1, method="tools/list", params={"_meta": {"v": 1}}), 0)
    record.from_daemon(line(id=1, result=TOOLS), 0)
    assert record.initialize_line() is None
    sent = parsed(record.replay(1))
    assert [m["method"] for m in sent] == ["tools/list"]
    assert sent[0]["params"] == {"_meta": {"v": 1}}


def test_superseded_is_kept_not_forwarded() -> None:
    record = initialized_session()
    assert record.from_daemon(line(method="assern/superseded", params={"build": "0.2+ab"}), 0) is False
    assert record.superseded == {"build": "0.2+ab"}


def test_lines_that_are_not_json_objects_pass_unchanged() -> None:
    record = SessionRecord()
    for bad in (b"not json\n", b"[1, 2]\n", b"\n"):
        assert record.from_client(bad, 3) == 3
        assert record.from_daemon(bad, 3) is True


def test_digest_ignores_order_of_keys_and_rejects_what_is_no_list() -> None:
    a = {"tools": [{"name": "x", "inputSchema": {"type": "object", "properties": {}}}]}
    b = {"tools": [{"inputSchema": {"properties": {}, "type": "object"}, "name": "x"}]}
    assert digest(a, "tools") == digest(b, "tools")
    assert digest({"tools": "x"}, "tools") is None
    assert digest(None, "tools") is None


def test_a_long_answer_is_matched_by_its_head_and_a_long_list_still_kept() -> None:
    record = initialized_session()
    big = {"content": [{"type": "text", "text": "x" * 5000}]}
    record.from_client(line(id=8, method="tools/call"), 0)
    assert (
        record.from_daemon(b'{"jsonrpc":"2.0","id":8,"result":' + json.dumps(big).encode() + b"}\n", 0)
        is True
    )
    assert record.waiting(0) == 0
    many = {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}} for n in range(200)]}
    record.from_client(line(id="l", method="tools/list"), 0)
    assert record.from_daemon(line(id="l", result=many), 0) is True
    assert record.lists["tools/list"][0] == digest(many, "tools")
    # an answer the head does not match (another key order) is parsed whole
    record.from_client(line(id=9, method="tools/call"), 0)
    other = json.dumps({"id": 9, "jsonrpc": "2.0", "result": big}).encode() + b"\n"
    assert record.from_daemon(other, 1) is False  # link 1 does not hold it
    assert record.from_daemon(other, 0) is True
    assert record.waiting(0) == 0


def test_fail_all_answers_every_request_with_why() -> None:
    record = initialized_session()
    record.from_client(line(id=1, method="tools/call"), 0)
    record.from_client(line(id=2, method="subscriptions/listen"), 0)
    assert parsed(record.fail_all("gone")) == parsed([lost_error(1, "gone"), lost_error(2, "gone")])
    assert record.waiting(0) == 0


def test_the_liveness_probe_is_one_each_era_answers() -> None:
    assert json.loads(initialized_session().probe())["method"] == "ping"
    modern = SessionRecord()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    modern.from_client(line(id=1, method="tools/call", params={"name": "x", "_meta": meta}), 0)
    probe = json.loads(modern.probe())
    assert probe["method"] == "server/discover"
    assert probe["params"] == {"_meta": meta}
    assert probe["id"].startswith(OWN_PREFIX)


def test_the_daemons_answers_to_initialize_and_lists_are_shown_to_on_answer() -> None:
    shown: list[tuple[str, dict[str, Any], object]] = []
    record = SessionRecord()
    record.on_answer = lambda method, request, result: shown.append((method, request, result))
    record.from_client(line(id=0, method="initialize", params=INIT), 0)
    record.from_daemon(line(id=0, result={"capabilities": {}}), 0)
    record.from_client(line(id=1, method="tools/list"), 0)
    record.from_daemon(line(id=1, result=TOOLS), 0)
    record.from_client(line(id=2, method="tools/call", params={"name": "alpha_echo"}), 0)
    record.from_daemon(line(id=2, result={"content": []}), 0)
    record.from_client(line(id=3, method="prompts/list"), 0)
    record.from_daemon(line(id=3, error={"code": -32601, "message": "no prompts"}), 0)
    assert [(method, result) for method, _, result in shown] == [
        ("initialize", {"capabilities": {}}),
        ("tools/list", TOOLS),
    ]
    assert shown[1][1]["id"] == 1


def test_what_the_bridge_answered_itself_is_kept_as_if_a_daemon_had() -> None:
    record = SessionRecord()
    record.answered_early({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}, {})
    record.answered_early({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, TOOLS)
    assert record.initialize is not None
    assert record.initialize["params"] == INIT
    assert not record.waiting(0)  # nothing in flight: it was answered
    [asked] = parsed(record.replay(0))  # no `initialized` came: none is replayed
    assert asked["method"] == "tools/list"
    changed = {"tools": [*TOOLS["tools"], {"name": "beta_echo"}]}
    notice = record.changed("tools/list", changed)
    assert json.loads(notice or b"null") == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_resource_templates_are_compared_too() -> None:
    record = initialized_session()
    templates = {"resourceTemplates": [{"uriTemplate": "a://{x}", "name": "x"}]}
    record.from_client(line(id=5, method="resources/templates/list"), 0)
    record.from_daemon(line(id=5, result=templates), 0)
    assert record.changed("resources/templates/list", templates) is None
    other: dict[str, list[object]] = {"resourceTemplates": []}
    assert json.loads(record.changed("resources/templates/list", other) or b"null") == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/list_changed",
    }


def test_a_short_answer_is_matched_by_its_head_with_string_and_negative_ids() -> None:
    record = initialized_session()
    record.from_client(line(id="call-é", method="tools/call"), 0)
    record.from_client(line(id=-3, method="tools/call"), 0)
    assert record.from_daemon(b'{"jsonrpc":"2.0","id":"call-\xc3\xa9","result":{}}\n', 0) is True
    assert record.from_daemon(b'{"jsonrpc": "2.0", "id": -3, "error": {"code": 1, "message": "m"}}\n', 0)
    assert record.waiting(0) == 0
    # a short list answer and an answer to the bridge's own request are still read whole
    record.from_client(line(id=4, method="tools/list"), 0)
    assert record.from_daemon(b'{"jsonrpc":"2.0","id":4,"result":' + json.dumps(TOOLS).encode() + b"}\n", 0)
    assert record.lists["tools/list"][0] == digest(TOOLS, "tools")
    # an id that is not UTF-8: not an answer the record knows, passed on
    assert record.from_daemon(b'{"jsonrpc":"2.0","id":"\xff","result":{}}\n', 0) is True
    probe = json.loads(record.probe())
    answer = b'{"jsonrpc":"2.0","id":"' + probe["id"].encode() + b'","result":{"ok":1}}\n'
    assert record.from_daemon(answer, 0) == ("ping", {"ok": 1})


def test_a_line_is_read_as_json_loads_reads_it() -> None:
    record = SessionRecord()
    # whitespace around the value, a BOM, CRLF: read (as json.loads reads them)
    for framed in (b' {"jsonrpc":"2.0","id":1,"method":"a"}\n', b'\xef\xbb\xbf{"id":2,"method":"a"}\n'):
        record.from_client(framed, 0)
    record.from_client(b'{"id":3,"method":"a"}\r\n', 0)
    assert sorted(record.client_requests) == [1, 2, 3]
    # two values, bytes that are not UTF-8, a truncated object: not JSON objects, passed
    for bad in (b'{"id":4,"method":"a"} {}\n', b'{"id":5,"method":"\xff"}\n', b'{"id":6,\n'):
        assert record.from_client(bad, 7) == 7
    assert sorted(record.client_requests) == [1, 2, 3]
