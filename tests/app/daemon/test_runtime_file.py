"""The daemon's runtime file: written private and whole, read back, and never taken for a
live daemon when it is garbage, stale, names another process or another cookie; removed
only by the daemon that wrote it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from assern.app.daemon.hello import PROTOCOL
from assern.app.daemon.runtime_file import (
    DaemonRecord,
    NotVerified,
    RuntimeFileError,
    Verified,
    new_record,
    parse_record,
    read_record,
    remove_own,
    runtime_path,
    verify,
    write_record,
)
from assern.app.instance import Slot

BUILD = "0.1.0+3f9a1c2b4d5e"


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process of this user that is not a daemon."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture
def gone_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def answering(doc: Mapping[str, Any] | None, asked: list[Slot] | None = None) -> Any:
    """A stand-in for the control socket's `hello`: what the daemon at the slot answers."""

    def hello(slot: Slot) -> Mapping[str, Any] | None:
        if asked is not None:
            asked.append(slot)
        return doc

    return hello


def test_a_record_is_written_private_and_read_back(tmp_path: Path) -> None:
    record = new_record(BUILD)
    path = write_record(tmp_path, record)
    assert path == runtime_path(tmp_path) == tmp_path / "daemon.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_record(path) == record
    assert (record.pid, record.protocol, len(record.cookie)) == (os.getpid(), PROTOCOL, 32)
    assert set(json.loads(path.read_text())) == {"pid", "started_at", "build", "protocol", "cookie"}
    assert [p.name for p in tmp_path.iterdir()] == ["daemon.json"]  # no temporary file left
    assert record.cookie not in repr(record)


def test_each_record_has_a_cookie_of_its_own() -> None:
    assert new_record(BUILD).cookie != new_record(BUILD).cookie


def test_a_rewrite_replaces_the_file_whole(tmp_path: Path) -> None:
    write_record(tmp_path, new_record(BUILD))
    second = new_record("0.2.0+000000000000")
    write_record(tmp_path, second)
    assert read_record(runtime_path(tmp_path)) == second


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "not JSON"),
        (b"\x00garbage", "not JSON"),
        (b"[]", "not a JSON object"),
        (b"{}", "pid must be an integer, found null"),
        (b'{"pid": true}', "pid must be an integer, found true"),
        (b'{"pid": "12"}', 'pid must be an integer, found "12"'),
        (b'{"pid": 12, "started_at": "now"}', "started_at must be a number"),
        (b'{"pid": 12, "started_at": 1.5, "build": 3}', "build must be a string"),
        (b'{"pid": 12, "started_at": 1.5, "build": "b", "protocol": 2.0}', "protocol must be an integer"),
        (b'{"pid": 12, "started_at": 1.5, "build": "b", "protocol": 2}', "cookie must be a string"),
        (
            b'{"pid": -1, "started_at": 1.5, "build": "b", "protocol": 2, "cookie": "c"}',
            "pid must be positive",
        ),
        (b'{"pid": 12, "started_at": 1.5, "build": "b", "protocol": 2, "cookie": ""}', "cookie is empty"),
    ],
)
def test_garbage_is_never_a_record(data: bytes, why: str) -> None:
    with pytest.raises(RuntimeFileError, match=why):
        parse_record(data)


def test_garbage_never_passes_for_the_daemon(tmp_path: Path) -> None:
    runtime_path(tmp_path).write_bytes(b"{not json")
    runtime_path(tmp_path).chmod(0o600)
    asked: list[Slot] = []
    found = verify(tmp_path, answering({"pid": os.getpid(), "cookie": "x"}, asked))
    assert isinstance(found, NotVerified)
    assert found.found
    assert found.reason == f"{runtime_path(tmp_path)} is not a daemon's runtime file: it is not JSON"
    assert asked == []  # nothing is asked of a socket on the word of garbage


def test_a_file_others_may_write_is_not_read(tmp_path: Path) -> None:
    path = write_record(tmp_path, new_record(BUILD))
    path.chmod(0o644)
    with pytest.raises(RuntimeFileError, match=r"others may read or write it \(mode 644, not 600\)"):
        read_record(path)
    assert isinstance(verify(tmp_path, answering(None)), NotVerified)


def test_an_oversized_file_is_not_read(tmp_path: Path) -> None:
    path = runtime_path(tmp_path)
    path.write_bytes(b" " * (1 << 20))
    path.chmod(0o600)
    with pytest.raises(RuntimeFileError, match="longer than"):
        read_record(path)


def test_no_file_is_said_as_such(tmp_path: Path) -> None:
    found = verify(tmp_path, answering(None))
    assert isinstance(found, NotVerified)
    assert not found.found
    assert "there is no runtime file" in found.reason


def test_the_pid_of_a_process_gone_is_stale(tmp_path: Path, gone_pid: int) -> None:
    write_record(tmp_path, new_record(BUILD, pid=gone_pid))
    found = verify(tmp_path, answering(None))
    assert isinstance(found, NotVerified)
    assert found.reason == f"{runtime_path(tmp_path)} is stale: pid {gone_pid} no longer runs"


def test_a_pid_that_is_another_process_now_never_passes(tmp_path: Path, live_pid: int) -> None:
    """The pid runs, but nothing answers at the socket beside the file."""
    write_record(tmp_path, new_record(BUILD, pid=live_pid))
    asked: list[Slot] = []
    found = verify(tmp_path, answering(None, asked))
    assert isinstance(found, NotVerified)
    assert f"pid {live_pid} runs, but no daemon answers at {tmp_path / 'daemon.ctl'}" in found.reason
    assert asked == [Slot(tmp_path, "daemon")]


def test_a_daemon_with_another_cookie_did_not_write_it(tmp_path: Path, live_pid: int) -> None:
    """A daemon answers, but another one: a file left by its predecessor whose pid was reused."""
    record = new_record(BUILD, pid=live_pid)
    write_record(tmp_path, record)
    for answer in ({"pid": live_pid, "cookie": "another"}, {"pid": live_pid + 1, "cookie": record.cookie}):
        found = verify(tmp_path, answering(answer))
        assert isinstance(found, NotVerified)
        assert f"(pid {answer['pid']}) did not write it (pid {live_pid})" in found.reason


def test_the_daemon_that_wrote_it_is_verified(tmp_path: Path) -> None:
    record = new_record(BUILD)
    write_record(tmp_path, record)
    hello = {"pid": os.getpid(), "cookie": record.cookie, "build": BUILD}
    found = verify(tmp_path, answering(hello))
    assert found == Verified(runtime_path(tmp_path), record, hello)


def test_only_the_daemon_that_wrote_it_removes_it(tmp_path: Path) -> None:
    mine = new_record(BUILD)
    successor = new_record(BUILD)
    write_record(tmp_path, successor)
    assert not remove_own(tmp_path, mine)
    assert read_record(runtime_path(tmp_path)) == successor
    assert remove_own(tmp_path, successor)
    assert not runtime_path(tmp_path).exists()
    assert not remove_own(tmp_path, successor)  # nothing left to remove


def test_garbage_in_its_place_is_left_alone(tmp_path: Path) -> None:
    runtime_path(tmp_path).write_text("garbage")
    assert not remove_own(tmp_path, new_record(BUILD))
    assert runtime_path(tmp_path).read_text() == "garbage"


def test_a_record_is_plain_data() -> None:
    record = DaemonRecord(pid=1, started_at=2.0, build=BUILD, protocol=PROTOCOL, cookie="c")
    assert parse_record(json.dumps(record.to_json()).encode()) == record
