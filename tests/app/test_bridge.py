"""The proxy's bridge: bytes both ways unchanged, and who ended the session."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assern.actors.listener.protocol import PROFILE_NOTE
from assern.app import bridge as bridge_module
from assern.app.bridge import bridge, log_event


class Ends:
    """The bridge's stdin and stdout (pipes) and the primary's end of its socket."""

    def __init__(self) -> None:
        self.proxy_sock, self.primary = socket.socketpair()
        self.stdin_read, self.client_write = os.pipe()
        self.client_read, self.stdout_write = os.pipe()
        self.ended: list[str] = []
        self.thread: threading.Thread | None = None

    def start(self, drain_timeout: float = 5.0) -> None:
        def run() -> None:
            self.ended.append(
                bridge(
                    self.proxy_sock,
                    stdin=self.stdin_read,
                    stdout=self.stdout_write,
                    drain_timeout=drain_timeout,
                )
            )

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self) -> str:
        assert self.thread is not None
        self.thread.join(10)
        assert not self.thread.is_alive(), "the bridge did not end"
        return self.ended[0]

    def read_primary(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.primary.recv(size - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def read_client(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = os.read(self.client_read, size - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def close(self) -> None:
        for sock in (self.proxy_sock, self.primary):
            sock.close()
        for fd in (self.stdin_read, self.client_write, self.client_read, self.stdout_write):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def ends() -> Iterator[Ends]:
    made = Ends()
    yield made
    made.close()


def test_bytes_pass_both_ways_unchanged_and_client_eof_ends_the_session(ends: Ends) -> None:
    ends.start()
    request = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n' + bytes(range(256)) * 4096  # 1 MiB, not text
    writer = threading.Thread(target=lambda: os.write(ends.client_write, request) and None)
    writer.start()
    assert ends.read_primary(len(request)) == request
    writer.join()
    answer = b'{"jsonrpc":"2.0","id":1,"result":{}}\n' * 3000
    ends.primary.sendall(answer)
    assert ends.read_client(len(answer)) == answer
    os.close(ends.client_write)  # our client is done
    assert ends.primary.recv(1) == b""  # the primary sees our write side shut
    ends.primary.close()
    assert ends.result() == "client"


def test_the_primary_hanging_up_first_ends_it_as_the_primary(ends: Ends) -> None:
    ends.start()
    ends.primary.sendall(b"last words\n")
    ends.primary.close()
    assert ends.result() == "primary"
    assert ends.read_client(11) == b"last words\n"


def test_a_primary_that_never_hangs_up_after_client_eof_is_left_after_the_drain(ends: Ends) -> None:
    ends.start(drain_timeout=0.2)
    os.close(ends.client_write)
    assert ends.result() == "client"


def test_a_client_that_stops_reading_ends_it_as_the_client(ends: Ends) -> None:
    ends.start()
    os.close(ends.client_read)
    ends.primary.sendall(b"x\n")
    assert ends.result() == "client"


def test_log_lines_have_the_shape_of_the_rest_of_the_log(tmp_path: Path) -> None:
    log_file = str(tmp_path / "logs" / "assern.log")
    log_event(log_file, "info", "proxy_stopped", ended_by="client", slot="assern")
    log_event(log_file, "warning", "proxy_stopped", ended_by="client", slot="quiet")
    lines = [json.loads(line) for line in Path(log_file).read_text().splitlines()]
    assert len(lines) == 1
    assert lines[0]["event"] == "proxy_stopped"
    assert lines[0]["level"] == "info"
    assert lines[0]["ended_by"] == "client"
    assert lines[0]["ts"].endswith("Z")
    assert os.stat(log_file).st_mode & 0o777 == 0o600


#: The folder the `assern` package is found in, as `exec_module` gives it.
ROOT = str(Path(os.path.abspath(bridge_module.__file__)).parent.parent.parent)


@pytest.mark.parametrize("module", ["assern.app.bridge", "assern.app.handover"])
def test_each_bridge_imports_only_the_standard_library(module: str) -> None:
    """Each runs under `python -I -S`: no site-packages, nothing of assern but itself and
    the standard-library-only modules it names."""
    mine = {"assern", "assern.app", "assern.app.bridge", "assern.app.session_record", module}
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r}); import {module}\n"
        "heavy = {'assern', 'trio', 'attrs', 'pathlib', 'typing'}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in heavy and m not in {mine!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["assern.app.bridge", "assern.app.handover"])
def test_each_bridge_launched_as_exec_module_does_refuses_wrong_arguments(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", bridge_module._LAUNCH, ROOT, module, "nope"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "usage" in done.stderr


def test_a_profile_is_announced_before_the_client_bytes(ends: Ends) -> None:
    """The primary reads the profile note first (actors/listener/session.py)."""
    assert bridge_module.PROFILE_NOTE == PROFILE_NOTE
    note = {"jsonrpc": "2.0", "method": PROFILE_NOTE, "params": {"name": "small"}}
    assert json.loads(bridge_module.profile_note("small")) == note
    bridge_module.announce(ends.proxy_sock, "small")
    ends.start()
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    os.write(ends.client_write, ping)
    os.close(ends.client_write)
    first = bridge_module.profile_note("small")
    assert ends.read_primary(len(first) + len(ping)) == first + ping
    assert ends.primary.recv(1) == b""  # the primary sees our write side shut
    ends.primary.close()
    assert ends.result() == "client"
