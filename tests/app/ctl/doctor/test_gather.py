"""Gathering the facts from real files, folders, sockets and processes, changing nothing."""

from __future__ import annotations

import grp
import http.server
import os
import pwd
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from doctor_facts import instance

from assern.actors.config.listen import parse_bind
from assern.actors.config.spec import Provenance, ServerSpec
from assern.app.ctl.doctor.gather import (
    gather,
    http_fact,
    interpreter_of,
    launcher,
    own_group,
    path_fact,
    process_path,
    run_paths,
)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a path short enough to bind a Unix socket in."""
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        yield Path(folder)


def test_each_kind_of_path_is_told_with_its_owner_and_mode(short_tmp: Path) -> None:
    folder = short_tmp / "run"
    folder.mkdir(mode=0o750)
    os.chmod(folder, 0o750)
    plain = short_tmp / "x.lock"
    plain.write_text("")
    os.chmod(plain, 0o640)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(short_tmp / "a.sock"))
        assert path_fact(short_tmp / "a.sock").kind == "socket"
    link = short_tmp / "link"
    link.symlink_to(folder)
    assert path_fact(folder).kind == "folder"
    assert (path_fact(folder).uid, path_fact(folder).gid, path_fact(folder).mode) == (
        os.getuid(),
        os.getgid(),
        0o750,
    )
    assert (path_fact(plain).kind, path_fact(plain).mode) == ("file", 0o640)
    assert path_fact(link).kind == "link"
    assert path_fact(link, follow=True).kind == "folder"
    assert path_fact(short_tmp / "nothing").kind == "missing"


def test_the_socket_folder_is_listed_with_its_hints(short_tmp: Path) -> None:
    run = short_tmp / "assern-1000" / "abc"
    (run / "hints").mkdir(parents=True)
    (run / "assern.lock").write_text("")
    (run / "hints" / "h1.json").write_text("{}")
    found = run_paths(run, fallback=True)
    assert [fact.path for fact in found] == [
        run.parent,
        run,
        run / "assern.lock",
        run / "hints",
        run / "hints" / "h1.json",
    ]
    assert [fact.path for fact in run_paths(short_tmp / "none", fallback=False)] == [short_tmp / "none"]


def script(path: Path, first_line: str) -> Path:
    path.write_text(f"{first_line}\necho hi\n")
    path.chmod(0o755)
    return path


def test_the_interpreter_of_a_script_is_read_from_its_first_line(tmp_path: Path) -> None:
    assert interpreter_of(str(script(tmp_path / "a", "#!/usr/bin/env node"))) == "node"
    assert interpreter_of(str(script(tmp_path / "b", "#!/usr/bin/env -S node --no-warnings"))) == "node"
    assert interpreter_of(str(script(tmp_path / "c", "#!/bin/sh -e"))) == "/bin/sh"
    assert interpreter_of(sys.executable) is None  # a binary
    assert interpreter_of(str(tmp_path / "missing")) is None


def stdio(command: str, env: dict[str, str], *, path_from_config: bool = False) -> ServerSpec:
    given = {"PATH": Provenance(layer="global-config", file="/c.toml")} if path_from_config else {}
    return ServerSpec(name="github", transport="stdio", command=command, env=env, env_keys_from=given)


def test_a_launcher_is_looked_up_on_the_path_its_instance_uses(tmp_path: Path) -> None:
    bin_a, bin_b, bin_c = (tmp_path / name for name in ("a", "b", "c"))
    for folder in (bin_a, bin_b, bin_c):
        folder.mkdir()
    npx = script(bin_a / "npx", "#!/usr/bin/env node")
    # this shell's PATH (the server's env): npx is there, node is not
    found = launcher(stdio("npx", {"PATH": str(bin_a)}), None, str(bin_a))
    assert (found.origin, found.found, found.interpreter, found.interpreter_found) == (
        "this shell's PATH",
        str(npx),
        "node",
        None,
    )
    node = script(bin_b / "node", "#!/bin/sh")
    found = launcher(stdio("npx", {"PATH": f"{bin_a}:{bin_b}"}), None, None)
    assert found.interpreter_found == str(node)
    # a running instance's own PATH wins over this shell's; not there, the shell's finds it
    running = instance(path=str(bin_c))
    found = launcher(stdio("npx", {"PATH": str(bin_a)}), running, str(bin_a))
    assert (found.origin, found.searched, found.found, found.elsewhere) == (
        "the PATH of the running instance (pid 4242)",
        str(bin_c),
        None,
        str(npx),
    )
    # a PATH the configuration sets is the one its server gets, whoever starts it
    found = launcher(stdio("npx", {"PATH": str(bin_a)}, path_from_config=True), running, None)
    assert (found.origin, found.found) == ("the PATH its configuration sets", str(npx))


def test_a_command_given_by_path_is_checked_where_it_points(tmp_path: Path) -> None:
    tool = script(tmp_path / "tool", "#!/bin/sh")
    assert launcher(stdio(str(tool), {}), None, None).found == str(tool)
    tool.chmod(0o644)
    missing = launcher(stdio(str(tool), {}), None, None)
    assert (missing.searched, missing.found) == (None, None)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_a_process_path_is_read_from_proc() -> None:
    assert process_path(os.getpid()) == os.environ.get("PATH", os.defpath)
    assert process_path(None) is None


class Healthz(http.server.BaseHTTPRequestHandler):
    body = b'{"status": "alive"}'

    def do_GET(self) -> None:
        code = 200 if self.path == "/healthz" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


class Other(Healthz):
    body = b"<html>not assern</html>"


@pytest.mark.parametrize(("handler", "answer"), [(Healthz, "assern"), (Other, "other")])
def test_who_holds_the_http_port_is_asked_at_healthz(handler: type[Healthz], answer: str) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        found = http_fact(parse_bind(f"127.0.0.1:{server.server_port}"), tls=False)
    finally:
        server.shutdown()
        server.server_close()
    assert found.answer == answer


def test_a_port_nobody_listens_at_is_free() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert http_fact(parse_bind(f"127.0.0.1:{port}"), tls=False).answer == "free"


def test_gather_with_no_configuration_and_no_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ASSERN_HOME", str(home / "ah"))
    monkeypatch.setenv("PATH", "")
    monkeypatch.chdir(home / "work")
    facts = gather(config_path=None, project=None, server=None)
    assert facts.config is not None
    assert facts.config_error is None
    assert dict(facts.config.servers) == {}
    assert facts.path == ""
    assert facts.instance is None
    assert facts.home_paths[0].kind == "missing"
    assert not (home / "ah").exists()  # nothing was created


def test_gather_looks_up_each_launcher_and_narrows_to_one_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[servers.a]\ncommand = "npx"\n[servers.b]\ncommand = "uvx"\n[servers.r]\nurl = "http://127.0.0.1:9/mcp"\n'
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ASSERN_HOME", str(tmp_path / "ah"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    facts = gather(config_path=config, project=None, server=None)
    assert [(f.server, f.found, f.origin) for f in facts.launchers] == [
        ("a", None, "this shell's PATH"),
        ("b", None, "this shell's PATH"),
    ]
    assert facts.flags == ("--config", str(config))
    assert [f.server for f in gather(config_path=config, project=None, server="b").launchers] == ["b"]
    broken = tmp_path / "broken.toml"
    broken.write_text('[servers.a]\ncommand = "${NOT_SET_ANYWHERE}"\n')
    failed = gather(config_path=broken, project=None, server=None)
    assert failed.config is None
    assert failed.config_error is not None
    assert failed.launchers == ()


class User:
    pw_name = "me"
    pw_gid = 1000


class Group:
    def __init__(self, name: str, members: list[str]) -> None:
        self.gr_name, self.gr_mem, self.gr_gid = name, members, 1000


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        (Group("me", []), 1000),  # a user private group
        (Group("me", ["me"]), 1000),
        (Group("me", ["me", "you"]), None),
        (Group("staff", []), None),
    ],
)
def test_our_group_counts_as_private_only_when_it_is_ours_alone(
    monkeypatch: pytest.MonkeyPatch, group: Group, expected: int | None
) -> None:
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: User())
    monkeypatch.setattr(grp, "getgrgid", lambda gid: group)
    assert own_group() == expected


def test_a_user_or_group_without_an_entry_has_no_private_group(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(_: int) -> User:
        raise KeyError("no entry")

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    assert own_group() is None
