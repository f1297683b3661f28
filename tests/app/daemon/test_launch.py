"""Starting the workstation daemon from a client: the variables read, the command run, the
detached start (nobody's child, a session of its own) and the wait for its socket."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from assern.app.daemon.launch import (
    DEFAULT_IDLE_EXIT,
    POLL_INTERVAL,
    alive,
    daemon_argv,
    daemon_wanted,
    idle_exit,
    spawn_detached,
    wait_for_daemon,
)


def test_the_daemon_is_wanted_unless_turned_off() -> None:
    assert daemon_wanted({})
    assert daemon_wanted({"ASSERN_NO_DAEMON": "0"})
    assert daemon_wanted({"ASSERN_NO_DAEMON": " "})
    assert not daemon_wanted({"ASSERN_NO_DAEMON": "1"})
    assert not daemon_wanted({"ASSERN_NO_DAEMON": "yes"})


@pytest.mark.parametrize(
    ("text", "seconds"), [("", DEFAULT_IDLE_EXIT), ("0", 0.0), ("90", 90.0), (" 2.5 ", 2.5)]
)
def test_idle_exit_reads_seconds(text: str, seconds: float) -> None:
    assert idle_exit({"ASSERN_DAEMON_IDLE_EXIT": text}) == (seconds, None)


@pytest.mark.parametrize("text", ["soon", "-1", "nan", "inf"])
def test_a_bad_idle_exit_falls_back_to_the_default_and_says_so(text: str) -> None:
    seconds, warning = idle_exit({"ASSERN_DAEMON_IDLE_EXIT": text})
    assert seconds == DEFAULT_IDLE_EXIT
    assert warning is not None
    assert "ASSERN_DAEMON_IDLE_EXIT" in warning
    assert repr(text) in warning


def test_the_daemon_runs_with_this_interpreter() -> None:
    argv = daemon_argv("/opt/py/bin/python3", 600.0)
    assert argv == ["/opt/py/bin/python3", "-m", "assern.app.quick", "daemon", "--idle-exit", "600"]
    assert daemon_argv("py", 2.5)[-1] == "2.5"


def _wait_gone(pid: int, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_detached_start_is_nobodys_child_outside_our_session(tmp_path: Path) -> None:
    out = tmp_path / "out"
    err = tmp_path / "err"
    fields = "f'{os.getsid(0)} {os.getpid()} {os.getcwd()} {os.environ[\"MARK\"]}'"
    code = f"import os, sys; open({str(out)!r}, 'w').write({fields}); sys.stderr.write('to the file')"
    pid = spawn_detached(
        [sys.executable, "-c", code], cwd=str(tmp_path), environ={"MARK": "here"}, stderr_path=str(err)
    )
    _wait_gone(pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # not our child: the double fork re-parented it
    session, own, cwd, mark = out.read_text().split()
    assert int(own) == pid
    assert int(session) != os.getsid(0)  # no signal to our session (a terminal's) reaches it
    assert (cwd, mark) == (str(tmp_path), "here")
    assert err.read_text() == "to the file"
    assert err.stat().st_mode & 0o777 == 0o600


def test_a_command_that_cannot_run_leaves_no_process(tmp_path: Path) -> None:
    pid = spawn_detached(
        [str(tmp_path / "missing")], cwd=str(tmp_path), environ={}, stderr_path=str(tmp_path / "err")
    )
    _wait_gone(pid)
    assert not alive(pid)


def test_the_wait_ends_when_the_socket_accepts(tmp_path: Path) -> None:
    path = tmp_path / "daemon.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    with listener:
        sock = wait_for_daemon(str(path), os.getpid(), timeout=5)
        assert sock is not None
        sock.close()


def test_the_wait_ends_when_the_started_daemon_exited_with_nobody_listening(tmp_path: Path) -> None:
    pid = spawn_detached(
        [sys.executable, "-c", "pass"], cwd=str(tmp_path), environ={}, stderr_path=str(tmp_path / "err")
    )
    _wait_gone(pid)
    assert wait_for_daemon(str(tmp_path / "daemon.sock"), pid, timeout=600) is None


def test_the_wait_gives_up_after_its_bound(tmp_path: Path) -> None:
    assert wait_for_daemon(str(tmp_path / "daemon.sock"), os.getpid(), timeout=0.05) is None


def test_what_the_pause_raises_ends_the_wait(tmp_path: Path) -> None:
    paused: list[float] = []

    def pause(seconds: float) -> None:
        paused.append(seconds)
        if len(paused) == 3:
            raise InterruptedError("the caller's reason")

    with pytest.raises(InterruptedError, match="the caller's reason"):
        wait_for_daemon(str(tmp_path / "daemon.sock"), os.getpid(), timeout=3600, pause=pause)
    assert paused == [POLL_INTERVAL] * 3
