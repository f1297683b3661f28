"""The workstation daemon, against real processes: one daemon for every project's clients.

`assern daemon` (no --config) runs one daemon per ASSERN_HOME. Each `assern serve`
joins it: it says where it runs (hello), the daemon resolves that folder's configuration
and serves it that view. Views share backends by what reaches their process.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import TESTING_SERVER, AssernEnv, assern_command, server_table
from instances import (
    Session,
    backend_pids,
    ctl,
    ctl_json,
    events,
    in_flight,
    reap,
    serve_in,
    socket_dir,
    text_of,
    wait_until,
    workstation,
)
from mcp import Client
from mcp.shared.exceptions import MCPError

from assern.app.daemon.hello import hello_line

pytestmark = pytest.mark.e2e
__all__ = ["reap"]  # the fixture: kills what a failing test left running


def beta_table(project: str) -> str:
    """A project-only server: `[projects.NAME.servers.beta]` running the test server."""
    args = ", ".join(f'"{a}"' for a in (str(TESTING_SERVER), "--name", "beta"))
    return f'[projects.{project}.servers.beta]\ncommand = "${{ASSERN_PYTHON}}"\nargs = [{args}]\n'


def two_projects(env: AssernEnv) -> tuple[Path, Path]:
    """Folders `a` (project a: alpha and beta) and `b` (no project: alpha alone)."""
    a, b = env.work / "a", env.work / "b"
    a.mkdir()
    b.mkdir()
    (env.assern_home / "config.toml").write_text(
        server_table("alpha") + f'\n[projects.a]\ndirectories = ["{a}"]\n\n' + beta_table("a")
    )
    return a, b


async def test_two_projects_share_a_backend_and_each_sees_only_its_own_servers(assern_env: AssernEnv) -> None:
    a, b = two_projects(assern_env)
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            in_a = Session(serve_in(assern_env, a))
            in_b = Session(serve_in(assern_env, b))
            client_a = await nursery.start(in_a.run)
            client_b = await nursery.start(in_b.run)
            names_a = {t.name for t in (await client_a.list_tools()).tools}
            names_b = {t.name for t in (await client_b.list_tools()).tools}
            assert {"alpha_echo", "beta_echo"} <= names_a
            assert "alpha_echo" in names_b
            assert not any(name.startswith("beta_") for name in names_b)
            # One alpha process serves both projects.
            pid_a = text_of(await client_a.call_tool("alpha_get_pid", {}))
            pid_b = text_of(await client_b.call_tool("alpha_get_pid", {}))
            assert pid_a == pid_b
            # b cannot reach a's server, even by its name.
            with pytest.raises(MCPError, match="Unknown tool 'beta_echo'"):
                await client_b.call_tool("beta_echo", {"text": "x"})
            assert text_of(await client_a.call_tool("beta_echo", {"text": "ours"})) == "ours"
            assert len(backend_pids(assern_env)) == 2  # alpha once, beta once

            doc = await ctl_json(assern_env, "status", cwd=a)
            daemon = doc["workstation"]
            assert len(daemon["sessions"]) == 2
            assert {s["project"] for s in daemon["sessions"]} == {"a", None}
            assert all(s["client"] and s["client_version"] for s in daemon["sessions"])
            shared = {backend["name"]: backend for backend in daemon["backends"]}
            assert len(shared["alpha"]["views"]) == 2
            assert shared["alpha"]["sessions"] == 2
            assert len(shared["beta"]["views"]) == 1
            assert doc["project"] == "a"  # and the view of this folder's configuration
            assert {backend["name"] for backend in doc["backends"]} == {"alpha", "beta"}
            readable = await ctl(assern_env, "status", cwd=b)
            assert "assern daemon: pid" in readable.stdout.decode()
            in_a.leave()
            in_b.leave()
    assert any(e.get("server") == "alpha" for e in events(assern_env, "backend_shared"))


async def test_both_protocol_eras_through_the_daemon(assern_env: AssernEnv) -> None:
    a, _ = two_projects(assern_env)
    with trio.fail_after(90):
        async with workstation(assern_env):
            for era in ("legacy", "2026-07-28"):
                async with Client(serve_in(assern_env, a), mode=era) as client:
                    names = {t.name for t in (await client.list_tools()).tools}
                    assert {"alpha_echo", "beta_echo"} <= names, era
                    answer = await client.call_tool("beta_echo", {"text": era})
                    assert text_of(answer) == era
    assert len(events(assern_env, "daemon_joined")) == 2


async def test_a_configuration_error_is_its_sessions_alone(assern_env: AssernEnv, tmp_path: Path) -> None:
    a, _ = two_projects(assern_env)
    broken = tmp_path / "broken.toml"
    broken.write_text("[servers.x]\ncommand = 5\n")
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            session = Session(serve_in(assern_env, a))
            client = await nursery.start(session.run)
            done = await trio.run_process(
                [assern_command(), "serve", "--config", str(broken)],
                env=assern_env.env,
                cwd=str(assern_env.work),
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert done.returncode == 2
            stderr = done.stderr.decode()
            assert "configuration error" in stderr
            assert "servers.x.command" in stderr
            assert done.stdout == b""
            # The other session goes on.
            assert text_of(await client.call_tool("alpha_echo", {"text": "still"})) == "still"
            session.leave()


def talk(path: Path, line: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(line)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"not json\n", "the first line is not JSON"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n', "starts with an assern/hello"),
        (
            b'{"jsonrpc": "2.0", "method": "assern/hello", "params": {"protocol": 99, "build": "9.9.9+x"}}\n',
            "this assern (build 9.9.9+x, protocol 99) cannot join the running daemon",
        ),
        (
            b'{"jsonrpc": "2.0", "method": "assern/hello", '
            b'"params": {"protocol": 2, "build": "b", "cwd": "rel", "env": {}}}\n',
            "cwd must be an absolute path",
        ),
    ],
)
async def test_a_connection_that_does_not_say_hello_is_refused_with_why(
    assern_env: AssernEnv, line: bytes, error: str
) -> None:
    with trio.fail_after(60):
        async with workstation(assern_env):
            answer = await trio.to_thread.run_sync(talk, socket_dir(assern_env) / "daemon.sock", line)
    message = json.loads(answer)
    assert message["method"] == "assern/refused"
    assert error in message["params"]["error"]


async def test_the_daemon_exits_when_idle(assern_env: AssernEnv) -> None:
    with trio.fail_after(60):
        async with workstation(assern_env, "--idle-exit", "1") as process:
            await process.wait()  # nobody came: it left by itself
            assert process.returncode == 0
    assert events(assern_env, "daemon_stopping", reason="idle for 1 s")
    assert not (socket_dir(assern_env) / "daemon.sock").exists()


async def test_a_second_daemon_is_refused_and_the_first_goes_on(assern_env: AssernEnv) -> None:
    _, b = two_projects(assern_env)
    with trio.fail_after(60):
        async with workstation(assern_env):
            second = await trio.run_process(
                [assern_command(), "daemon"],
                env=assern_env.env,
                cwd=str(assern_env.work),
                stdin=subprocess.DEVNULL,
                capture_stderr=True,
                check=False,
            )
            assert second.returncode == 1
            assert "a daemon already runs" in second.stderr.decode()
            async with Client(serve_in(assern_env, b), mode="legacy") as client:
                assert text_of(await client.call_tool("alpha_echo", {"text": "on"})) == "on"


async def test_with_the_daemon_off_a_client_still_gets_an_instance(assern_env: AssernEnv) -> None:
    """`ASSERN_NO_DAEMON=1`: `assern serve` elects a primary for its configuration."""
    _, b = two_projects(assern_env)
    assern_env.per_config()
    with trio.fail_after(60):
        async with Client(serve_in(assern_env, b), mode="legacy") as client:
            assert "alpha_echo" in {t.name for t in (await client.list_tools()).tools}
    assert not events(assern_env, "daemon_joined")
    assert not events(assern_env, "daemon_starting")
    assert events(assern_env, "instance_primary")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_the_first_client_starts_the_daemon_and_the_next_ones_join_it(assern_env: AssernEnv) -> None:
    a, b = two_projects(assern_env)
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            first = Session(serve_in(assern_env, a))
            client_a = await nursery.start(first.run)
            assert {"alpha_echo", "beta_echo"} <= {t.name for t in (await client_a.list_tools()).tools}
            second = Session(serve_in(assern_env, b))
            client_b = await nursery.start(second.run)
            names_b = {t.name for t in (await client_b.list_tools()).tools}
            assert "alpha_echo" in names_b
            assert not any(name.startswith("beta_") for name in names_b)
            pid = text_of(await client_a.call_tool("alpha_get_pid", {}))
            assert text_of(await client_b.call_tool("alpha_get_pid", {})) == pid
            doc = (await ctl_json(assern_env, "status", cwd=a))["workstation"]
            daemon_pid = doc["daemon"]["pid"]
            assert doc["daemon"]["started_by"].startswith("assern serve (pid ")
            assert len(doc["sessions"]) == 2
            # Detached: not the child of the `assern serve` that started it, nor in its
            # session (a signal to the client's terminal does not reach it).
            starter = int(doc["daemon"]["started_by"].removeprefix("assern serve (pid ").rstrip(")"))
            assert parent_of(daemon_pid) != starter
            assert os.getsid(daemon_pid) != os.getsid(starter)
            first.leave()
            second.leave()
    starting = events(assern_env, "daemon_starting")
    assert [e["pid"] for e in starting] == [daemon_pid]
    assert len(events(assern_env, "daemon_joined")) == 2
    assert not events(assern_env, "instance_primary")

    async def sessions_left() -> bool:
        doc = (await ctl_json(assern_env, "status", cwd=a))["workstation"]
        assert doc["daemon"]["pid"] == daemon_pid  # still there for the next client
        return not doc["sessions"]

    with trio.fail_after(30):
        while not await sessions_left():  # noqa: ASYNC110 - asked of another process
            await trio.sleep(0.05)


async def test_clients_starting_at_once_start_one_daemon(assern_env: AssernEnv) -> None:
    _, b = two_projects(assern_env)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            sessions = [Session(serve_in(assern_env, b)) for _ in range(4)]
            clients = []

            async def join(session: Session) -> None:
                clients.append(await nursery.start(session.run))

            async with trio.open_nursery() as starting:
                for session in sessions:
                    starting.start_soon(join, session)
            pids = {text_of(await client.call_tool("alpha_get_pid", {})) for client in clients}
            assert len(pids) == 1
            doc = (await ctl_json(assern_env, "status", cwd=b))["workstation"]
            assert len(doc["sessions"]) == 4
            for session in sessions:
                session.leave()
    # However many daemons the clients started, one claimed the sockets; the others said
    # so and left.
    running = [e["pid"] for e in events(assern_env, "daemon_starting")]
    assert running == [doc["daemon"]["pid"]]
    assert not events(assern_env, "instance_primary")
    err = assern_env.assern_home / "logs" / "daemon.err"
    refused = err.read_text().count("a daemon already runs")
    started = err.read_text().count("assern daemon: pid ")
    assert started == 1
    assert refused <= 3


async def test_a_daemon_that_cannot_start_leaves_its_client_served_and_says_why(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    _, b = two_projects(assern_env)
    run = socket_dir(assern_env)
    run.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    run.symlink_to(elsewhere)  # an unsafe socket folder: no daemon (nor instance) listens there
    try:
        with trio.fail_after(120):
            process = await trio.run_process(
                [assern_command(), "serve"],
                env=assern_env.env,
                cwd=b,
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    finally:
        run.unlink()
    stderr = process.stderr.decode()
    assert process.returncode == 0, stderr
    assert "the workstation daemon did not start; see " in stderr
    assert "serving this client with an instance of its own" in stderr
    assert "refusing to put sockets there" in stderr  # the instance's own reason
    err = (assern_env.assern_home / "logs" / "daemon.err").read_text()
    assert "is not a plain folder; refusing to put sockets there" in err
    assert not events(assern_env, "daemon_joined")
    assert not events(assern_env, "daemon_starting")


async def raw_session(path: Path, env: dict[str, str], folder: Path) -> list[str]:
    """One client on the daemon's socket by hand: hello, initialize, tools/list; the names."""
    stream = await trio.open_unix_socket(str(path))
    async with stream:
        hello = hello_line(cwd=str(folder), environ=env, config=None, project=None, profile=None)
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        await stream.send_all(
            hello
            + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode()
            + b"\n"
            + b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
            + b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n'
        )
        buffer = b""
        while True:
            chunk = await stream.receive_some(65536)
            assert chunk, "the daemon hung up"
            buffer += chunk
            for line in buffer.split(b"\n")[:-1]:
                message = json.loads(line)
                if message.get("id") == 2:
                    return [tool["name"] for tool in message["result"]["tools"]]


async def test_fifty_sessions_at_once_are_each_served_their_view(assern_env: AssernEnv) -> None:
    a, b = two_projects(assern_env)
    path = socket_dir(assern_env) / "daemon.sock"
    found: dict[int, list[str]] = {}

    async def one(index: int) -> None:
        found[index] = await raw_session(path, assern_env.env, a if index % 2 else b)

    with trio.fail_after(120):
        async with workstation(assern_env):
            async with trio.open_nursery() as nursery:
                for index in range(50):
                    nursery.start_soon(one, index)
            doc = await ctl_json(assern_env, "status", cwd=b)
    assert len(found) == 50
    for index, names in found.items():
        assert "alpha_echo" in names
        assert ("beta_echo" in names) == bool(index % 2)
    assert len(doc["workstation"]["views"]) == 2
    assert len(events(assern_env, "backend_pooled")) == 2  # alpha and beta, once each


async def test_a_project_folder_deleted_under_its_sessions_leaves_them_working(assern_env: AssernEnv) -> None:
    a, _ = two_projects(assern_env)
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            session = Session(serve_in(assern_env, a))
            client = await nursery.start(session.run)
            assert text_of(await client.call_tool("beta_echo", {"text": "before"})) == "before"
            a.rmdir()
            assert text_of(await client.call_tool("beta_echo", {"text": "after"})) == "after"
            assert text_of(await client.call_tool("alpha_echo", {"text": "after"})) == "after"
            session.leave()


#: What systemd does for a socket-activated service: the listening sockets as descriptors
#: 3 and 4, LISTEN_PID naming the process that runs the daemon, then exec.
ACTIVATE = """
import fcntl, os, sys
given = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3]]
for target, fd in zip((3, 4), given):
    os.dup2(fd, target)
    os.set_inheritable(target, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = "2"
os.execv(sys.argv[3], [sys.argv[3], "daemon"])
"""


async def test_a_socket_activated_daemon_takes_the_sockets_it_is_given(assern_env: AssernEnv) -> None:
    from assern.actors.listener.unix_socket import bind_unix
    from assern.app.instance import prepare_socket_directory, socket_directory

    _, b = two_projects(assern_env)
    directory = socket_directory(assern_env.assern_home, assern_env.env)
    prepare_socket_directory(directory)
    held = [bind_unix(directory.path / name) for name in ("daemon.sock", "daemon.ctl")]
    try:
        with trio.fail_after(90):
            process = await trio.lowlevel.open_process(
                [sys.executable, "-c", ACTIVATE, *(str(s.fileno()) for s in held), assern_command()],
                env=assern_env.env,
                cwd=str(assern_env.work),
                stdin=subprocess.DEVNULL,
                pass_fds=[s.fileno() for s in held],
            )
            await wait_until(lambda: events(assern_env, "daemon_starting"), limit=30)
            async with Client(serve_in(assern_env, b), mode="legacy") as client:
                assert text_of(await client.call_tool("alpha_echo", {"text": "given"})) == "given"
            doc = await ctl_json(assern_env, "status", cwd=b)
            assert doc["workstation"]["daemon"]["started_by"] == "socket activation"
            done = await ctl(assern_env, "shutdown", cwd=b)
            assert done.returncode == 0, done.stderr.decode()
            await process.wait()
        # The files are the service manager's: the daemon left them.
        assert (directory.path / "daemon.sock").exists()
        assert (directory.path / "daemon.ctl").exists()
    finally:
        for sock in held:
            sock.close()


async def test_two_projects_whose_server_differs_in_env_get_two_backends(assern_env: AssernEnv) -> None:
    a, b = assern_env.work / "a", assern_env.work / "b"
    a.mkdir()
    b.mkdir()
    (assern_env.assern_home / "config.toml").write_text(
        server_table("alpha")
        + 'env = { COLOUR = "blue" }\n'
        + f'\n[projects.a]\ndirectories = ["{a}"]\n\n[projects.a.servers.alpha]\nenv = {{ COLOUR = "red" }}\n'
    )
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            in_a, in_b = Session(serve_in(assern_env, a)), Session(serve_in(assern_env, b))
            client_a = await nursery.start(in_a.run)
            client_b = await nursery.start(in_b.run)
            assert text_of(await client_a.call_tool("alpha_get_env", {"name": "COLOUR"})) == "red"
            assert text_of(await client_b.call_tool("alpha_get_env", {"name": "COLOUR"})) == "blue"
            pids = {text_of(await c.call_tool("alpha_get_pid", {})) for c in (client_a, client_b)}
            assert len(pids) == 2
            doc = await ctl_json(assern_env, "status", cwd=a)
            names = sorted(backend["name"] for backend in doc["workstation"]["backends"])
            assert names[0] == "alpha"
            assert names[1].startswith("alpha~")  # the second key's pool name
            in_a.leave()
            in_b.leave()


async def test_through_the_daemon_only_the_trusted_projects_own_servers_run(assern_env: AssernEnv) -> None:
    """Two project folders with their own `.assern/config.toml`, each with a server that
    leaves a marker when it starts; one folder trusted: only its server runs."""
    from test_trust import marker_server

    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    trusted, untrusted = assern_env.work / "trusted", assern_env.work / "untrusted"
    for folder in (trusted, untrusted):
        (folder / ".assern").mkdir(parents=True)
        (folder / ".assern" / "config.toml").write_text(marker_server(folder / "started"))
    with trio.fail_after(90):
        granted = await ctl(assern_env, "trust", "--yes", cwd=trusted)
        assert granted.returncode == 0, granted.stderr.decode()
        async with workstation(assern_env):
            async with Client(serve_in(assern_env, trusted), mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"alpha_echo", "build_echo"} <= names
            joined = await trio.run_process(
                [assern_command(), "serve"],
                env=assern_env.env,
                cwd=str(untrusted),
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            async with Client(serve_in(assern_env, untrusted), mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert "alpha_echo" in names
                assert "build_echo" not in names
    assert (trusted / "started").exists()
    assert not (untrusted / "started").exists()
    assert "assernctl trust" in joined.stderr.decode()


async def _page(url: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    """GET `url` as a browser would (status, headers, body), in a worker thread."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)

    def get() -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection(parts.netloc, timeout=30)
        try:
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request("GET", target, headers={"Cookie": cookie} if cookie else {})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            connection.close()

    return await trio.to_thread.run_sync(get)


async def test_the_daemons_status_page_shows_its_sessions_and_shared_backends(assern_env: AssernEnv) -> None:
    a, _ = two_projects(assern_env)
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            in_a = Session(
                serve_in(assern_env, a), client_info=types.Implementation(name="page-watcher", version="1")
            )
            client = await nursery.start(in_a.run)
            await client.call_tool("alpha_echo", {"text": "an-argument-never-shown"})
            done = await ctl(assern_env, "web", "--print", cwd=a)
            assert done.returncode == 0, done.stderr.decode()
            login = done.stdout.decode().strip()
            status, headers, _ = await _page(login)
            assert status == 303
            cookie = headers["set-cookie"].split(";")[0]
            status, _, page = await _page(login.split("login?")[0], cookie)
            assert status == 200
            assert "<dt>started_by</dt>" in page  # the daemon's own facts
            assert 'id="backend-alpha" data-state="ready"' in page  # the shared backends
            assert 'id="backend-beta" data-state="ready"' in page
            assert "page-watcher" in page  # the session, with its project
            assert "<td>a</td>" in page
            assert "echo" in page  # the last calls of every view
            assert "an-argument-never-shown" not in page
            in_a.leave()


async def test_a_restart_hands_new_clients_to_a_new_daemon_while_the_old_finishes_its_call(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    _, b = two_projects(assern_env)
    gate = tmp_path / "gate"
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            first = Session(serve_in(assern_env, b))
            client = await nursery.start(first.run)
            old = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            assert old["generation"] == 1
            answer: list[str] = []

            async def held_call() -> None:
                answer.append(text_of(await client.call_tool("alpha_gate", {"path": str(gate)})))

            nursery.start_soon(held_call)
            await in_flight(assern_env, b)
            restarted = await ctl(assern_env, "daemon", "restart", "--drain", "60", cwd=b)
            assert restarted.returncode == 0, restarted.stderr.decode()
            assert f"pid {old['pid']}" in restarted.stdout.decode()
            # A client that starts now is served by the new daemon.
            second = Session(serve_in(assern_env, b))
            later = await nursery.start(second.run)
            assert text_of(await later.call_tool("alpha_echo", {"text": "new"})) == "new"
            doc = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            assert doc["pid"] != old["pid"]
            assert doc["generation"] == 2
            assert doc["predecessor"]["pid"] == old["pid"]
            assert doc["predecessor"]["draining"] is True
            assert doc["predecessor"]["reason"].startswith("assernctl daemon restart")
            assert not answer  # still held on the old daemon
            gate.touch()
            await wait_until(lambda: bool(answer), limit=30)
            assert answer == ["opened"]  # the call in flight finished where it ran
            await wait_until(lambda: bool(events(assern_env, "daemon_stopped")), limit=30)
            second.leave()
            first.leave()
    superseded = events(assern_env, "daemon_superseded")
    assert [e["successor_pid"] for e in superseded] == [doc["pid"]]
    stopping = [e["reason"] for e in events(assern_env, "daemon_stopping")]
    assert stopping == [f"superseded by {doc['build']}"]
    drained = events(assern_env, "daemon_drained")
    assert drained[0]["calls_cut"] == 0


def newer_install(tmp_path: Path, version: str = "9.9.9") -> dict[str, str]:
    """A second install of this package, of `version`, on PYTHONPATH (the environment
    a client of that install runs `assern serve` with)."""
    import assern.actors.identity

    package = Path(assern.actors.identity.__file__).parent.parent  # src/assern, or site-packages/assern
    target = tmp_path / f"newer-{version}" / "assern"
    skip = shutil.ignore_patterns("__pycache__")
    for child in package.iterdir():
        if child.name != "__pycache__" and child.is_dir():
            shutil.copytree(child.resolve(), target / child.name, ignore=skip)
    identity = target / "actors" / "identity.py"
    identity.write_text(identity.read_text().replace('__version__ = "0.1.0"', f'__version__ = "{version}"'))
    return {"PYTHONPATH": str(target.parent)}


async def test_a_client_of_a_newer_install_replaces_the_daemon_and_an_older_one_joins(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    _, b = two_projects(assern_env)
    newer = newer_install(tmp_path)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            old_client = Session(serve_in(assern_env, b))
            first = await nursery.start(old_client.run)
            old = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            params = serve_in(assern_env, b)
            upgraded = Session(params.model_copy(update={"env": {**(params.env or {}), **newer}}))
            client = await nursery.start(upgraded.run)
            assert text_of(await client.call_tool("alpha_echo", {"text": "upgraded"})) == "upgraded"
            doc = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            assert doc["build"].startswith("9.9.9+")
            assert doc["generation"] == 2
            assert doc["predecessor"]["pid"] == old["pid"]
            assert f"of build {doc['build']}" in doc["predecessor"]["reason"]
            await wait_until(lambda: bool(events(assern_env, "daemon_stopped")), limit=60)
            # The first client's session moved to the newer daemon when it was told.
            assert text_of(await first.call_tool("alpha_echo", {"text": "moved"})) == "moved"
            # A client of the older install joins the newer daemon as it is.
            older = Session(serve_in(assern_env, b))
            again = await nursery.start(older.run)
            assert text_of(await again.call_tool("alpha_echo", {"text": "joined"})) == "joined"
            now = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            assert now["pid"] == doc["pid"]
            for session in (old_client, upgraded, older):
                session.leave()
    assert [e["reason"] for e in events(assern_env, "daemon_stopping")] == [f"superseded by {doc['build']}"]
    met = events(assern_env, "daemon_build_differs")
    differs = [(e["daemon_build"][:5], e["client_build"][:5]) for e in met]
    # the newer client met it, then the first client's session moved, then the older joined
    assert differs == [("0.1.0", "9.9.9"), ("9.9.9", "0.1.0"), ("9.9.9", "0.1.0")]
    assert [(e["why"], e["requests_failed"]) for e in events(assern_env, "session_resumed")] == [
        ("superseded", 0)
    ]


async def test_clients_of_two_new_installs_starting_at_once_all_end_on_the_newest(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    _, b = two_projects(assern_env)
    installs = {"9.9.8": newer_install(tmp_path, "9.9.8"), "9.9.9": newer_install(tmp_path, "9.9.9")}
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            first = Session(serve_in(assern_env, b))
            sessions = [first]
            clients = {"0.1.0": await nursery.start(first.run)}

            async def start(version: str) -> None:
                params = serve_in(assern_env, b)
                session = Session(
                    params.model_copy(update={"env": {**(params.env or {}), **installs[version]}})
                )
                sessions.append(session)
                clients[version] = await nursery.start(session.run)

            async with trio.open_nursery() as both:  # the two new installs' clients at once
                for version in installs:
                    both.start_soon(start, version)
            # Whichever replaced the daemon first, the newest ends up serving; no client is lost.
            while True:
                doc = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
                if doc["build"].startswith("9.9.9+") and not doc["predecessor"]["draining"]:
                    break
                await trio.sleep(0.1)
            for version, client in clients.items():
                assert text_of(await client.call_tool("alpha_echo", {"text": version})) == version
            for session in sessions:
                session.leave()
    assert not [e for e in events(assern_env, "session_resumed") if e["requests_failed"]]


async def test_a_call_still_running_at_the_drain_deadline_gets_a_clear_error(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    _, b = two_projects(assern_env)
    gate = tmp_path / "never"
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            first = Session(serve_in(assern_env, b))
            client = await nursery.start(first.run)
            failed: list[str] = []

            async def held_call() -> None:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("alpha_gate", {"path": str(gate)})
                failed.append(str(raised.value))

            nursery.start_soon(held_call)
            await in_flight(assern_env, b)
            restarted = await ctl(assern_env, "daemon", "restart", "--drain", "1", cwd=b)
            assert restarted.returncode == 0, restarted.stderr.decode()
            await wait_until(lambda: bool(failed), limit=30)
            first.leave()
    assert "was superseded by build" in failed[0], failed
    assert "drain deadline of 1 s passed while this request ran; it was not retried" in failed[0]
    await wait_until(lambda: bool(events(assern_env, "daemon_drained")), limit=30)
    (drained,) = events(assern_env, "daemon_drained")
    assert drained["calls_cut"] == 1
    assert events(assern_env, "daemon_drain_deadline")


def lazy_table(name: str) -> str:
    """A server that starts on its first call (`start = "lazy"`)."""
    return server_table(name) + 'start = "lazy"\n'


def warmed_backends(env: AssernEnv) -> dict[str, int | None]:
    """The backends the log says were started to warm for a successor, with their pids."""
    return {e["server"]: e["pid"] for e in events(env, "backend_started", reason="warming for a successor")}


async def test_a_successor_warms_what_the_moving_sessions_ran_before_it_takes_the_sockets(
    assern_env: AssernEnv,
) -> None:
    a, b = two_projects(assern_env)
    config = assern_env.assern_home / "config.toml"
    config.write_text(config.read_text() + "\n" + lazy_table("later") + "\n" + lazy_table("asleep"))
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            in_b = Session(serve_in(assern_env, b))
            client = await nursery.start(in_b.run)
            assert text_of(await client.call_tool("later_echo", {"text": "woken"})) == "woken"
            in_a = Session(serve_in(assern_env, a))
            gone = await nursery.start(in_a.run)
            assert text_of(await gone.call_tool("beta_echo", {"text": "a"})) == "a"
            shutil.rmtree(a)  # its context no longer resolves: skipped, the rest is warmed
            old = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            restarted = await ctl(assern_env, "daemon", "restart", cwd=b)
            assert restarted.returncode == 0, restarted.stderr.decode()
            doc = (await ctl_json(assern_env, "status", cwd=b))["workstation"]
            assert doc["daemon"]["pid"] != old["pid"]
            warmed = doc["daemon"]["warmed"]
            assert (warmed["views"], warmed["sessions"], warmed["backends"]) == (1, 1, 2), warmed
            assert warmed["not_warm"] == []
            # Before any session moved, the backends its session ran are up; the lazy one
            # that never ran is not.
            states = {backend["name"]: backend for backend in doc["backends"]}
            assert states["alpha"]["state"] == "ready"
            assert states["later"]["state"] == "ready"
            assert states["asleep"]["state"] == "lazy"
            started = warmed_backends(assern_env)
            assert started == {"alpha": states["alpha"]["pid"], "later": states["later"]["pid"]}
            # The moved session is served by those very processes.
            assert text_of(await client.call_tool("later_echo", {"text": "moved"})) == "moved"
            now = (await ctl_json(assern_env, "status", cwd=b))["workstation"]
            after = {backend["name"]: backend for backend in now["backends"]}
            assert after["later"]["pid"] == started["later"]
            assert after["alpha"]["pid"] == started["alpha"]
            assert after["alpha"]["sessions"] >= 1
            in_a.leave()
            in_b.leave()
    skipped = [e for e in events(assern_env, "daemon_warm_skipped") if e.get("cwd") == str(a)]
    assert [e["reason"] for e in skipped] == ["its folder is gone"]
    (line,) = events(assern_env, "daemon_warmed")
    assert (line["views"], line["sessions"], line["backends"], line["skipped"]) == (1, 1, 2, 1)
    assert "env" not in json.dumps(events(assern_env, "daemon_warm_skipped"))
    assert assern_env.env["HOME"] not in json.dumps(line)


def older_install(tmp_path: Path) -> dict[str, str]:
    """A copy of this package of an older version whose daemon does not know `contexts`."""
    found = newer_install(tmp_path, "0.0.1")
    protocol = Path(found["PYTHONPATH"]) / "assern" / "actors" / "listener" / "control_protocol.py"
    text = protocol.read_text()
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith('"contexts":'))
    assert kept != text
    protocol.write_text(kept + "\n")
    return found


async def test_a_daemon_that_does_not_know_contexts_is_superseded_without_warming(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    _, b = two_projects(assern_env)
    older = older_install(tmp_path)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            params = serve_in(assern_env, b)
            first = Session(params.model_copy(update={"env": {**(params.env or {}), **older}}))
            client = await nursery.start(first.run)
            old = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            assert old["build"].startswith("0.0.1+")
            restarted = await ctl(assern_env, "daemon", "restart", cwd=b)
            assert restarted.returncode == 0, restarted.stderr.decode()
            doc = (await ctl_json(assern_env, "status", cwd=b))["workstation"]["daemon"]
            assert doc["pid"] != old["pid"]
            assert doc["warmed"] is None
            assert text_of(await client.call_tool("alpha_echo", {"text": "moved"})) == "moved"
            first.leave()
    (skipped,) = events(assern_env, "daemon_warm_skipped")
    assert skipped["reason"] == f"the running daemon (build {old['build']}) does not know `contexts`"
    assert not events(assern_env, "daemon_warmed")
    assert not warmed_backends(assern_env)
