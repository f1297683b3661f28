"""The daemon's hello line: built and read back with its protocol and build, refused with
why (an unsupported protocol with what to do), and the socket folder the shim finds
without pathlib is the one the daemon binds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assern.app.daemon.hello import (
    PROTOCOL,
    PROTOCOLS,
    BadHello,
    Unsupported,
    hello_line,
    read_hello,
    socket_folder,
)
from assern.app.daemon.identity import build_id
from assern.app.instance import socket_directory

DAEMON_BUILD = "0.1.0+aaaaaaaaaaaa"


def test_a_hello_is_read_back_as_it_was_written(tmp_path: Path) -> None:
    environ = {"A": "1", "HOME": str(tmp_path)}
    line = hello_line(cwd="/work/a", environ=environ, config=None, project="p", profile="fast")
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    params = read_hello(line.rstrip(b"\n"), daemon_build=DAEMON_BUILD)
    assert params["cwd"] == "/work/a"
    assert params["env"] == environ
    assert (params["config"], params["project"], params["profile"]) == (None, "p", "fast")


def test_the_hello_says_its_protocol_and_this_installs_build(tmp_path: Path) -> None:
    """By itself: the shim (app/quick.py) passes neither; the build's cache goes to the
    hello's own `$ASSERN_HOME`."""
    home = tmp_path / "assern"
    home.mkdir()
    line = hello_line(
        cwd="/w",
        environ={"HOME": str(tmp_path), "ASSERN_HOME": str(home)},
        config=None,
        project=None,
        profile=None,
    )
    params = read_hello(line, daemon_build=DAEMON_BUILD)
    assert params["protocol"] == PROTOCOL
    assert params["build"] == build_id(str(home))
    assert list((home / "cache" / "build").iterdir())
    given = hello_line(
        cwd="/w", environ={}, config=None, project=None, profile=None, build="0.0.9+bbbbbbbbbbbb"
    )
    assert read_hello(given, daemon_build=DAEMON_BUILD)["build"] == "0.0.9+bbbbbbbbbbbb"


def _hello(**params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "assern/hello", "params": params}).encode()


GOOD: dict[str, object] = {"cwd": "/x", "env": {}, "config": None, "project": None, "profile": None}


@pytest.mark.parametrize("protocol", [PROTOCOLS[0] - 1, PROTOCOLS[1] + 1, 0, 99])
def test_a_protocol_this_daemon_does_not_read_is_refused_with_what_to_do(protocol: int) -> None:
    with pytest.raises(Unsupported) as caught:
        read_hello(_hello(protocol=protocol, build="0.0.1+cccccccccccc", **GOOD), daemon_build=DAEMON_BUILD)
    message = str(caught.value)
    assert message.startswith(
        f"this assern (build 0.0.1+cccccccccccc, protocol {protocol}) cannot join the running daemon "
        f"(build {DAEMON_BUILD}, protocol {PROTOCOL}); "
    )
    if protocol > PROTOCOLS[1]:
        assert (
            "run `assernctl shutdown` to stop the daemon, then start `assern daemon` of this install"
            in message
        )
    else:
        assert "upgrade this assern to the daemon's build, or run `assernctl shutdown`" in message


def test_the_first_daemons_hello_is_protocol_1_of_an_unknown_build() -> None:
    """Its number was `version` and it had no build: refused as protocol 1, not as garbage."""
    with pytest.raises(Unsupported, match=r"^this assern \(build unknown, protocol 1\) cannot join"):
        read_hello(_hello(version=1, **GOOD), daemon_build=DAEMON_BUILD)


def test_a_supported_protocol_of_another_build_is_read() -> None:
    params = read_hello(
        _hello(protocol=PROTOCOL, build="9.9.9+dddddddddddd", **GOOD), daemon_build=DAEMON_BUILD
    )
    assert params["build"] == "9.9.9+dddddddddddd"


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ("nope", "not JSON"),
        ({"method": "initialize"}, "starts with an assern/hello"),
        ({"method": "assern/hello"}, "no params object"),
        ({"method": "assern/hello", "params": {"version": 2}}, "protocol must be an integer"),
        (
            {"method": "assern/hello", "params": {"protocol": "2", "build": "b"}},
            "protocol must be an integer",
        ),
        (
            {"method": "assern/hello", "params": {"protocol": True, "build": "b"}},
            "protocol must be an integer",
        ),
        ({"method": "assern/hello", "params": {"protocol": PROTOCOL}}, "build must be a string"),
        ({"method": "assern/hello", "params": {"protocol": PROTOCOL, "build": 7}}, "build must be a string"),
        (
            {"method": "assern/hello", "params": {"protocol": PROTOCOL, "build": "b", "cwd": "x", "env": {}}},
            "absolute",
        ),
        (
            {
                "method": "assern/hello",
                "params": {"protocol": PROTOCOL, "build": "b", "cwd": "/x", "env": {"A": 1}},
            },
            "env",
        ),
        (
            {
                "method": "assern/hello",
                "params": {"protocol": PROTOCOL, "build": "b", "cwd": "/x", "env": {}, "project": 3},
            },
            "project",
        ),
    ],
)
def test_a_bad_hello_is_refused_with_why(message: object, why: str) -> None:
    line = message.encode() if isinstance(message, str) else json.dumps(message).encode()
    with pytest.raises(BadHello, match=why) as caught:
        read_hello(line, daemon_build=DAEMON_BUILD)
    assert not isinstance(caught.value, Unsupported)


@pytest.mark.parametrize("depth", [1, 40])
def test_the_shim_finds_the_folder_the_daemon_binds(tmp_path: Path, depth: int) -> None:
    home = tmp_path.joinpath(*(["deep-folder-name"] * depth)) / "assern"
    environ = {"XDG_RUNTIME_DIR": str(tmp_path / "runtime")}
    expected = socket_directory(home, environ, uid=1000, platform="linux").path
    assert socket_folder(str(home), environ, 1000, platform="linux") == str(expected)
