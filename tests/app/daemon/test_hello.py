"""The daemon's hello line: built and read back, refused with why, and the socket folder
the shim finds without pathlib is the one the daemon binds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assern.app.daemon.hello import BadHello, hello_line, read_hello, socket_folder
from assern.app.instance import socket_directory


def test_a_hello_is_read_back_as_it_was_written() -> None:
    line = hello_line(cwd="/work/a", environ={"A": "1"}, config=None, project="p", profile="fast")
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    params = read_hello(line.rstrip(b"\n"))
    assert params["cwd"] == "/work/a"
    assert params["env"] == {"A": "1"}
    assert (params["config"], params["project"], params["profile"]) == (None, "p", "fast")


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ("nope", "not JSON"),
        ({"method": "initialize"}, "starts with an assern/hello"),
        ({"method": "assern/hello"}, "no params object"),
        ({"method": "assern/hello", "params": {"version": 2}}, "version 2"),
        ({"method": "assern/hello", "params": {"version": 1, "cwd": "x", "env": {}}}, "absolute"),
        ({"method": "assern/hello", "params": {"version": 1, "cwd": "/x", "env": {"A": 1}}}, "env"),
        (
            {"method": "assern/hello", "params": {"version": 1, "cwd": "/x", "env": {}, "project": 3}},
            "project",
        ),
    ],
)
def test_a_bad_hello_is_refused_with_why(message: object, why: str) -> None:
    line = message.encode() if isinstance(message, str) else json.dumps(message).encode()
    with pytest.raises(BadHello, match=why):
        read_hello(line)


@pytest.mark.parametrize("depth", [1, 40])
def test_the_shim_finds_the_folder_the_daemon_binds(tmp_path: Path, depth: int) -> None:
    home = tmp_path.joinpath(*(["deep-folder-name"] * depth)) / "assern"
    environ = {"XDG_RUNTIME_DIR": str(tmp_path / "runtime")}
    expected = socket_directory(home, environ, uid=1000, platform="linux").path
    assert socket_folder(str(home), environ, 1000, platform="linux") == str(expected)
