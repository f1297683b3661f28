"""Taking the daemon's sockets over in steps, against a stand-in running daemon on a real
control socket: its `contexts` (or none, from an older build), then the sockets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from assern.actors.listener.control_protocol import UNKNOWN_COMMAND, error_line, ok_line
from assern.actors.listener.unix_socket import bind_unix
from assern.app.daemon.supersede import begin_takeover
from assern.app.instance import InstanceError, Slot
from assern.app.instance_lock import InstanceLock

CONTEXTS = {"sessions": [], "views": [{"label": "-@12345678", "running": ["alpha"]}]}


def dead_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


class Running:
    """A running daemon's control socket that answers `hello` (with `pid`), `contexts`
    (unless `knows_contexts` is false: an older build) and hangs up at `supersede`."""

    def __init__(self, slot: Slot, *, pid: int, knows_contexts: bool) -> None:
        self.pid = pid
        self.knows_contexts = knows_contexts
        self.asked: list[str] = []
        self.listening = bind_unix(slot.control)
        self.listening.setblocking(True)
        bind_unix(slot.mcp).close()  # its MCP socket file, which the takeover replaces
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.listening.accept()
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                request = json.loads(line)
                name = request["command"]
                self.asked.append(name)
                if name == "supersede":
                    return  # it dies before it answers
                conn.sendall(self.answer(name, request["id"]))

    def answer(self, name: str, request_id: Any) -> bytes:
        if name == "hello":
            return ok_line(request_id, {"pid": self.pid, "build": "0.1.0+old", "generation": 1})
        if name == "contexts" and self.knows_contexts:
            return ok_line(request_id, CONTEXTS)
        return error_line(request_id, UNKNOWN_COMMAND, f"unknown command {name!r}")

    def close(self) -> None:
        self.listening.close()
        self.thread.join(5)


@pytest.fixture
def slot(tmp_path: Path) -> Slot:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return Slot(folder, "daemon")


def connects(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def test_the_running_daemons_contexts_are_read_on_the_kept_connection(slot: Slot) -> None:
    running = Running(slot, pid=dead_pid(), knows_contexts=True)
    lock = InstanceLock(slot.directory / "daemon.lock")
    assert lock.try_acquire()
    try:
        takeover = begin_takeover(slot, build="0.1.0+new", reason="a test", deadline=60.0, lock=lock)
        assert takeover.contexts() == (CONTEXTS, None)
        takeover.abandon()
    finally:
        running.close()
    assert running.asked == ["hello", "contexts"]
    assert not lock.held


def test_an_older_daemon_has_no_contexts_and_one_that_died_meanwhile_leaves_the_sockets_to_us(
    slot: Slot,
) -> None:
    running = Running(slot, pid=dead_pid(), knows_contexts=False)
    lock = InstanceLock(slot.directory / "daemon.lock")
    assert lock.try_acquire()
    try:
        takeover = begin_takeover(slot, build="0.1.0+new", reason="a test", deadline=60.0, lock=lock)
        answer, why = takeover.contexts()
        assert answer is None
        assert why == "the running daemon (build 0.1.0+old) does not know `contexts`"
        mcp, control = takeover.complete()
    finally:
        running.close()
    assert running.asked == ["hello", "contexts", "supersede"]
    assert not lock.held
    assert (mcp.path, control.path) == (slot.mcp, slot.control)
    assert connects(slot.mcp)
    assert connects(slot.control)
    mcp.withdraw()
    control.withdraw()


def test_a_running_daemon_that_does_not_answer_supersede_while_alive_fails_the_takeover(slot: Slot) -> None:
    running = Running(slot, pid=os.getpid(), knows_contexts=True)
    lock = InstanceLock(slot.directory / "daemon.lock")
    assert lock.try_acquire()
    try:
        takeover = begin_takeover(slot, build="0.1.0+new", reason="a test", deadline=60.0, lock=lock)
        with pytest.raises(InstanceError, match="superseding the running daemon failed"):
            takeover.complete()
    finally:
        running.close()
    assert not lock.held
    assert takeover.predecessor.sock is None
