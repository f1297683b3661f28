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

from assern.app import handover
from assern.app.daemon import launch
from assern.app.first_answers import EarlyAnswers, session_key
from assern.app.handover import Gone, Handover, complete_lines, liveness, unsent_errors
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
    """A Handover in a thread: the client's pipes (its stdin a socket when `stdin` says
    so) and the first daemon's socket."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdin: str = "pipe") -> None:
        monkeypatch.chdir(tmp_path)
        self.path = tmp_path / "daemon.sock"
        ours, self.old = socket.socketpair()
        if stdin == "socket":
            bridge_end, client_end = socket.socketpair()
            self.stdin_read, self.client_write = bridge_end.detach(), client_end.detach()
        else:
            self.stdin_read, self.client_write = os.pipe()
        self.stdin = stdin
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
        self.close_stdin()
        self.old.close()
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.ended[0]

    def close_stdin(self) -> None:
        """The client closes its end of our stdin (a socket's: shuts its write side,
        still reading, as a half-closing client does)."""
        if self.stdin == "socket":
            with socket.socket(fileno=os.dup(self.client_write)) as end:
                end.shutdown(socket.SHUT_WR)
        else:
            os.close(self.client_write)


@pytest.fixture(params=["pipe"])
def bridge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Bridge]:
    made = Bridge(tmp_path, monkeypatch, request.param)
    yield made
    made.old.close()
    for fd in (made.stdin_read, made.client_read, made.stdout_write):
        os.close(fd)
    if made.stdin == "socket":
        os.close(made.client_write)


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


# ------------------------------------------------------------ the client leaves while a resume waits

LEFT_MESSAGE = "the client closed its input before a daemon was joined; this request was not sent"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


class Silent:
    """What answers at the daemon's socket while a resume waits: `none` (a socket file
    nobody listens on, and a daemon "started" that never listens), `hello` (a daemon
    that accepts and never welcomes) or `initialize` (one that welcomes and never
    answers the replayed `initialize`). `reached` is set once the resume waits there;
    `hung_up` once the bridge closed the connection it made."""

    def __init__(self, path: Path, stage: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        self.reached = threading.Event()
        self.hung_up = threading.Event()
        monkeypatch.setattr(handover, "RESUME_TIMEOUT", 3600.0)  # far beyond any run of a test
        monkeypatch.setattr(handover, "WELCOME_WAIT", 3600.0)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))  # the socket file stays, as a killed daemon's does
        if stage == "none":
            monkeypatch.setattr(launch, "spawn_daemon", self.spawn)
            self.hung_up.set()  # no connection to close
        else:
            self.listener.listen(4)
            threading.Thread(target=self.serve, args=(stage,), daemon=True).start()

    def spawn(self, _home: str, _environ: object) -> tuple[int, str]:
        self.reached.set()
        return os.getpid(), ""  # "starting" and alive, never listening

    def serve(self, stage: str) -> None:
        conn, _ = self.listener.accept()
        with conn:
            lines = Lines(lambda: conn.recv(65536))
            while (message := lines.next()) is not None:
                if message.get("method") == "assern/hello" and stage == "initialize":
                    send(conn, method="assern/welcome", params={"build": "b"})
                elif message.get("method") in ("assern/hello", "initialize"):
                    self.reached.set()
            self.hung_up.set()

    def make_way(self) -> None:
        """Leave the socket file to a daemon that comes up."""
        self.listener.close()
        self.path.unlink()


def handshake_2026(bridge: Bridge) -> None:
    """A 2026-07-28 client: no `initialize`, its era's `_meta` on every request."""
    bridge.say(id=1, method="tools/list", params={"_meta": META})
    assert bridge.old_lines.next() == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": META},
    }
    send(bridge.old, id=1, result=TOOLS)
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 1, "result": TOOLS}


def kill_under_a_call(bridge: Bridge, era: str) -> None:
    """The session's handshake, a call sent, and the daemon gone under it: the call's
    error is read by the client (the resume has begun)."""
    if era == "2026-07-28":
        handshake_2026(bridge)
    else:
        handshake(bridge)
    params: dict[str, Any] = {"name": "alpha_echo", "arguments": {"text": "lost"}}
    if era == "2026-07-28":
        params["_meta"] = META
    bridge.say(id=2, method="tools/call", params=params)
    assert bridge.old_lines.next() is not None
    bridge.old.shutdown(socket.SHUT_RDWR)
    assert bridge.client.next() == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32603, "message": LOST_MESSAGE},
    }


@pytest.mark.parametrize("stage", ["none", "hello", "initialize"])
@pytest.mark.parametrize("bridge", ["pipe", "socket"], indirect=True)
def test_a_client_that_closes_stdin_while_no_daemon_answers_ends_the_bridge_at_once(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    silent = Silent(bridge.path, stage, monkeypatch)
    kill_under_a_call(bridge, "2025-11-25")
    assert silent.reached.wait(10)  # the resume waits there, and would for an hour
    bridge.close_stdin()
    bridge.thread.join(10)
    assert not bridge.thread.is_alive()
    assert bridge.ended == ["client"]  # not Gone: the bound was not run out
    assert silent.hung_up.wait(10)  # the connection it tried is closed
    assert bridge.handover.unsent == 0
    silent.listener.close()


@pytest.mark.parametrize("bridge", ["pipe", "socket"], indirect=True)
def test_what_a_leaving_client_wrote_during_the_resume_is_answered_with_an_error(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    silent = Silent(bridge.path, "hello", monkeypatch)
    kill_under_a_call(bridge, "2025-11-25")
    assert silent.reached.wait(10)
    bridge.say(id=3, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "late"}})
    bridge.say(method="notifications/cancelled", params={"requestId": 2})  # needs no answer
    bridge.close_stdin()
    bridge.thread.join(10)
    assert bridge.ended == ["client"]
    assert bridge.client.next() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32603, "message": LEFT_MESSAGE},
    }
    assert bridge.handover.unsent == 1
    silent.listener.close()


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("bridge", ["pipe", "socket"], indirect=True)
def test_what_a_client_writes_during_the_resume_reaches_the_new_daemon_after_the_replay(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    silent = Silent(bridge.path, "none", monkeypatch)
    kill_under_a_call(bridge, era)
    assert silent.reached.wait(10)
    params: dict[str, Any] = {"name": "alpha_echo", "arguments": {"text": "meanwhile"}}
    if era == "2026-07-28":
        params["_meta"] = META
    bridge.say(id=3, method="tools/call", params=params)  # waits in the pipe, unread
    silent.make_way()
    new = NewDaemon(bridge.path, TOOLS)
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 3, "result": {"text": "meanwhile"}}
    methods = [m.get("method") for m in new.got]
    if era == "2026-07-28":
        assert methods == ["assern/hello", "tools/list", "tools/call"]
    else:
        assert methods == [
            "assern/hello",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
        ]
    assert new.got[-1]["id"] == 3
    assert bridge.close() == "client"


def test_unsent_errors_answer_the_requests_only() -> None:
    lines = [
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}\n',
        b'{"jsonrpc": "2.0", "id": "s", "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}\n',
        b'{"jsonrpc": "2.0", "id": 4, "result": {}}\n',  # an answer to a daemon's request
        b"not json\n",
        b"[1, 2]\n",
    ]
    assert [json.loads(error) for error in unsent_errors(lines)] == [
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": LEFT_MESSAGE}},
        {"jsonrpc": "2.0", "id": "s", "error": {"code": -32603, "message": LEFT_MESSAGE}},
    ]


def test_a_client_that_closes_stdin_while_the_daemon_it_started_welcomes_nobody_ends_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: int
) -> None:
    bridge = EarlyBridge(tmp_path, monkeypatch, {"initialize": INITIALIZED}, ours)
    bridge.say(id=0, method="initialize", params=INIT)
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 0, "result": INITIALIZED}
    bridge.say(method="notifications/initialized")
    bridge.say(id=1, method="tools/call", params={"name": "alpha_echo", "arguments": {"text": "held"}})
    bridge.say(id=2, method="ping")  # answered from the kept session: what came before is held
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    silent = Silent(bridge.path, "hello", monkeypatch)  # accepts, and never welcomes
    assert silent.reached.wait(10)
    ended = bridge.close()
    assert ended == "client"  # not Gone: the bound was not run out
    assert bridge.handover.unsent == 1
    assert silent.hung_up.wait(10)
    silent.listener.close()


def test_a_file_as_stdin_is_sent_once_the_daemon_it_started_comes_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: int
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "daemon.sock"
    requests = tmp_path / "requests.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "e", "arguments": {"text": "f"}},
        },
    ]
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    client_read, stdout_write = os.pipe()
    stdin = os.open(requests, os.O_RDONLY)
    join = {"socket": str(path), "home": str(tmp_path), "build": "b", "starting": ours}
    handover = Handover(
        None,
        join,
        log_file=None,
        log_level="info",
        stdin=stdin,
        stdout=stdout_write,
        early=EarlyAnswers({session_key(INIT): {"initialize": INITIALIZED}}),
    )
    file_ended = threading.Event()
    input_closed = handover._input_closed

    def seen() -> None:
        input_closed()
        file_ended.set()

    monkeypatch.setattr(handover, "_input_closed", seen)
    ended: list[str] = []
    thread = threading.Thread(target=lambda: ended.append(handover.run()), daemon=True)
    thread.start()
    client = Lines(lambda: os.read(client_read, 65536))
    assert client.next() == {"jsonrpc": "2.0", "id": 0, "result": INITIALIZED}
    assert file_ended.wait(10)  # the file's end, its call held: the bridge waits on
    daemon = NewDaemon(path, TOOLS)
    assert client.next() == {"jsonrpc": "2.0", "id": 1, "result": {"text": "f"}}
    thread.join(10)
    assert ended == ["client"]
    assert [m.get("method") for m in daemon.got][-1] == "tools/call"
    for fd in (stdin, client_read, stdout_write):
        os.close(fd)


def test_an_empty_stdin_ends_the_bridge_before_the_daemon_it_started_comes_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: int
) -> None:
    monkeypatch.chdir(tmp_path)
    stdin = os.open(os.devnull, os.O_RDONLY)
    join = {"socket": str(tmp_path / "daemon.sock"), "home": str(tmp_path), "build": "b", "starting": ours}
    handover = Handover(None, join, log_file=None, log_level="info", stdin=stdin, early=EarlyAnswers({}))
    assert handover.run() == "client"  # nothing to send: no wait for a daemon that never listens
    assert handover.unsent == 0
    os.close(stdin)


def test_a_client_that_closes_stdin_while_a_successor_welcomes_nobody_ends_on_the_old_daemon(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handshake(bridge)
    silent = Silent(bridge.path, "hello", monkeypatch)  # the successor accepts, never welcomes
    send(bridge.old, method="assern/superseded", params={"build": "0.2+ab"})
    assert silent.reached.wait(10)
    call = {"name": "alpha_echo", "arguments": {"text": "last"}}
    bridge.say(id=2, method="tools/call", params=call)  # written while the join waits
    bridge.close_stdin()
    # The old daemon still serves the session: it gets what the client wrote last, and
    # then the end of the session, as when a client closes stdin.
    assert bridge.old_lines.next() == {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
    send(bridge.old, id=2, result={"text": "last"})
    assert bridge.client.next() == {"jsonrpc": "2.0", "id": 2, "result": {"text": "last"}}
    assert bridge.old_lines.next() is None
    bridge.old.close()
    bridge.thread.join(10)
    assert bridge.ended == ["client"]
    assert silent.hung_up.wait(10)
    silent.listener.close()
