"""The resuming bridge's loop against daemons played by the test (sockets and pipes); and
before the daemon it started is there: the client answered from a kept session
(app/first_answers.py), the rest held, then sent once the daemon joins."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assern.app.first_answers import EarlyAnswers, session_key
from assern.app.handover import Gone, Handover, complete_lines, liveness
from assern.app.session_record import LOST_MESSAGE

TOOLS = {"tools": [{"name": "alpha_echo", "inputSchema": {"type": "object"}}]}


def send(sock: socket.socket, **message: Any) -> None:
    sock.sendall(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")


class Lines:
    """Newline-delimited JSON read from a socket or a pipe."""

    def __init__(self, read: Any) -> None:
        self.read = read
        self.buffer = b""

    def next(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            chunk = self.read()
            if not chunk:
                return None
            self.buffer += chunk
        first, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(first)
        return message


class NewDaemon:
    """A daemon listening at `path`: welcomes a hello, answers initialize, tools/list
    (with `tools`) and tools/call (its arguments' `text`); records what it got."""

    def __init__(self, path: Path, tools: dict[str, Any]) -> None:
        self.tools = tools
        self.got: list[dict[str, Any]] = []
        self.joined = threading.Event()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn, self.listener:
            self.answer(conn)

    def answer(self, conn: socket.socket) -> None:
        lines = Lines(lambda: conn.recv(65536))
        while (message := lines.next()) is not None:
            self.got.append(message)
            method = message.get("method")
            if method == "notifications/initialized":
                self.joined.set()
            if method == "assern/hello":
                send(conn, method="assern/welcome", params={"build": "b"})
            elif "id" in message and method == "tools/list":
                send(conn, id=message["id"], result=self.tools)
            elif "id" in message and method == "tools/call":
                send(conn, id=message["id"], result={"text": message["params"]["arguments"]["text"]})
            elif "id" in message:
                send(conn, id=message["id"], result={})


class Bridge:
    """A Handover in a thread: the client's pipes and the first daemon's socket."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        self.path = tmp_path / "daemon.sock"
        ours, self.old = socket.socketpair()
        self.stdin_read, self.client_write = os.pipe()
        self.client_read, self.stdout_write = os.pipe()
        join = {"socket": str(self.path), "home": str(tmp_path), "build": "b"}
        self.handover = Handover(
            ours, join, log_file=None, log_level="info", stdin=self.stdin_read, stdout=self.stdout_write
        )
        self.client = Lines(lambda: os.read(self.client_read, 65536))
        self.old_lines = Lines(lambda: self.old.recv(65536))
        self.ended: list[str] = []
        self.thread = threading.Thread(target=lambda: self.ended.append(self.handover.run()), daemon=True)
        self.thread.start()

    def say(self, **message: Any) -> None:
        os.write(self.client_write, json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def close(self) -> str:
        os.close(self.client_write)
        self.old.close()
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.ended[0]


@pytest.fixture
def bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bridge]:
    made = Bridge(tmp_path, monkeypatch)
    yield made
    for fd in (made.stdin_read, made.client_read, made.stdout_write):
        os.close(fd)


def handshake(bridge: Bridge) -> None:
    bridge.say(id=0, method="initialize", params={"protocolVersion": "2025-11-25", "capabilities": {}})
    assert bridge.old_lines.next() == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
    }
    send(bridge.old, id=0, result={"capabilities": {}})
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 0, "result": {"capabilities": {}}}
    bridge.say(method="notifications/initialized")
    bridge.say(id=1, method="tools/list")
    bridge.old_lines.next()
    assert bridge.old_lines.next() == {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    send(bridge.old, id=1, result=TOOLS)
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 1, "result": TOOLS}


def test_a_daemon_that_dies_fails_the_call_in_flight_and_the_next_goes_to_the_new_one(
    bridge: Bridge, tmp_path: Path
) -> None:
    handshake(bridge)
    changed = {"tools": [*TOOLS["tools"], {"name": "gamma_echo", "inputSchema": {"type": "object"}}]}
    new = NewDaemon(bridge.path, changed)
    bridge.say(id=2, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "lost"}})
    assert bridge.old_lines.next() is not None
    bridge.old.shutdown(socket.SHUT_RDWR)  # the daemon dies under the call
    error = bridge.client.next()
    assert error == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": LOST_MESSAGE}}
    assert bridge.client.next() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    bridge.say(id=3, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "next"}})
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 3, "result": {"text": "next"}}
    methods = [m.get("method") for m in new.got]
    assert methods == ["assern/hello", "initialize", "notifications/initialized", "tools/list", "tools/call"]
    assert new.got[0]["params"]["resumes"] is True
    assert new.got[4]["id"] == 3  # the lost call was not sent again
    assert bridge.close() == "client"


def test_superseded_moves_new_requests_while_the_old_daemon_finishes_its_call(
    bridge: Bridge, tmp_path: Path
) -> None:
    handshake(bridge)
    new = NewDaemon(bridge.path, TOOLS)
    bridge.say(id=2, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "held"}})
    assert bridge.old_lines.next() is not None
    send(bridge.old, method="assern/superseded", params={"build": "0.2+ab"})
    assert new.joined.wait(10)
    bridge.say(id=3, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "new"}})
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 3, "result": {"text": "new"}}
    send(bridge.old, id=2, result={"text": "held"})  # the call in flight finishes where it ran
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 2, "result": {"text": "held"}}
    assert bridge.old_lines.next() is None  # and then the old connection is closed
    assert [m.get("method") for m in new.got][-1] == "tools/call"
    assert bridge.close() == "client"


def test_liveness_reads_a_positive_number_of_seconds() -> None:
    assert liveness({"ASSERN_DAEMON_LIVENESS": "2.5"}) == 2.5
    for bad in ("", "0", "-1", "inf", "soon"):
        assert liveness({"ASSERN_DAEMON_LIVENESS": bad}) == 10.0


# ---------------------------------------------------------------------- a daemon we started

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
INITIALIZED = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}}}


class EarlyBridge:
    """A Handover with no daemon yet, in a thread, with the client's pipes."""

    def __init__(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: dict[str, Any], pid: int
    ) -> None:
        monkeypatch.chdir(tmp_path)
        self.path = tmp_path / "daemon.sock"
        self.stdin_read, self.client_write = os.pipe()
        self.client_read, self.stdout_write = os.pipe()
        join = {"socket": str(self.path), "home": str(tmp_path), "build": "b", "starting": pid}
        self.handover = Handover(
            None,
            join,
            log_file=None,
            log_level="info",
            stdin=self.stdin_read,
            stdout=self.stdout_write,
            early=EarlyAnswers({session_key(INIT): kept}),
        )
        self.client = Lines(lambda: os.read(self.client_read, 65536))
        self.ended: list[str | BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.ended.append(self.handover.run())
        except Gone as gone:
            self.ended.append(gone)

    def say(self, **message: Any) -> None:
        os.write(self.client_write, json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def close(self) -> str | BaseException:
        os.close(self.client_write)
        self.thread.join(10)
        assert not self.thread.is_alive()
        for fd in (self.stdin_read, self.client_read, self.stdout_write):
            os.close(fd)
        return self.ended[0]


@pytest.fixture
def ours() -> int:
    return os.getpid()  # a daemon "starting" that stays alive


def test_the_kept_session_answers_while_the_daemon_starts_and_the_rest_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: int
) -> None:
    kept = {"initialize": INITIALIZED, "tools/list": TOOLS}
    bridge = EarlyBridge(tmp_path, monkeypatch, kept, ours)
    bridge.say(id=0, method="initialize", params=INIT)
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 0, "result": INITIALIZED}
    bridge.say(method="notifications/initialized")
    bridge.say(id=1, method="tools/list")
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 1, "result": TOOLS}
    bridge.say(id=2, method="prompts/list")  # not kept: waits
    bridge.say(id=3, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "held"}})
    changed = {"tools": [*TOOLS["tools"], {"name": "gamma_echo", "inputSchema": {"type": "object"}}]}
    daemon = NewDaemon(bridge.path, changed)  # the daemon comes up
    answers = [bridge.client.next() for _ in range(3)]
    assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"} in answers
    assert {"jsonrpc": "2.0", "id": 2, "result": {}} in answers
    assert {"jsonrpc": "2.0", "id": 3, "result": {"text": "held"}} in answers
    methods = [m.get("method") for m in daemon.got]
    assert methods == [
        "assern/hello",
        "initialize",
        "notifications/initialized",
        "tools/list",
        "prompts/list",
        "tools/call",
    ]
    assert daemon.got[1]["params"] == INIT
    assert daemon.got[1]["id"] != 0  # replayed under an id of the bridge's own
    assert bridge.close() == "client"


def test_another_clients_initialize_waits_for_the_daemon_with_everything_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: int
) -> None:
    bridge = EarlyBridge(tmp_path, monkeypatch, {"initialize": INITIALIZED, "tools/list": TOOLS}, ours)
    other = {**INIT, "clientInfo": {"name": "other", "version": "2"}}
    bridge.say(id=0, method="initialize", params=other)
    bridge.say(method="notifications/initialized")
    bridge.say(id=1, method="tools/list")  # no kept session for this client: waits
    daemon = NewDaemon(bridge.path, TOOLS)
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 0, "result": {}}
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 1, "result": TOOLS}
    methods = [m.get("method") for m in daemon.got]
    assert methods == ["assern/hello", "initialize", "notifications/initialized", "tools/list"]
    assert daemon.got[1]["id"] == 0  # the client's own, sent as it was
    assert bridge.close() == "client"


def test_a_daemon_that_never_comes_up_fails_what_was_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = subprocess.run(["true"], check=True)  # a pid that is no daemon any more
    assert done.returncode == 0
    exited = subprocess.Popen(["true"])
    exited.wait()
    bridge = EarlyBridge(tmp_path, monkeypatch, {"initialize": INITIALIZED}, exited.pid)
    bridge.say(id=0, method="initialize", params=INIT)
    ended = bridge.close()
    assert isinstance(ended, Gone)
    assert "did not start" in str(ended)


def test_complete_lines_keeps_what_follows_the_last_newline_for_the_next_chunk() -> None:
    pending = bytearray()
    assert complete_lines(pending, b'{"a":1}\n') == [b'{"a":1}\n']
    assert complete_lines(pending, b'{"b":') == []
    assert complete_lines(pending, b'2}\n{"c":3}\n{"d"') == [b'{"b":2}\n', b'{"c":3}\n']
    assert pending == b'{"d"'
    assert complete_lines(pending, b":4}\n") == [b'{"d":4}\n']
    assert pending == b""
    assert complete_lines(pending, b"\n") == [b"\n"]
