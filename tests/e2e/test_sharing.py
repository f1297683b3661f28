"""Instance sharing with real processes: one primary per resolved configuration.

The first `assern serve` of a configuration runs the backends; later ones bridge their
stdio to its socket. These tests count the backend processes of their own ASSERN_HOME,
read pids from the backends themselves (`get_pid`) and from `assernctl status --json`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import AssernEnv, server_table
from instances import (
    Session,
    backend_pids,
    ctl,
    ctl_json,
    daemon,
    events,
    reap,  # noqa: F401 - autouse fixture
    serve_in,
    socket_dir,
    text_of,
    wait_until,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def per_config(assern_env: AssernEnv) -> None:
    """These tests are of one instance per configuration: the daemon is off."""
    assern_env.per_config()


async def get_pid(client: Any) -> int:
    return int(text_of(await client.call_tool("alpha_get_pid", {})))


async def test_a_second_serve_proxies_to_the_first_and_outlives_it(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(server_table("alpha"))
    run = socket_dir(assern_env)
    asked: list[str] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(text_in(params.messages[0].content))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="from B"), model="m"
        )

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            first = Session(assern_env.serve(config))
            a = await nursery.start(first.run)
            backend = await get_pid(a)
            second = Session(assern_env.serve(config), sampling_callback=sampling)
            b = await nursery.start(second.run)

            # One set of backends: both clients reach the same process.
            assert await get_pid(b) == backend
            assert backend_pids(assern_env) == [backend]
            assert len(events(assern_env, "instance_primary")) == 1
            assert len(events(assern_env, "instance_proxy")) == 1
            status = await ctl_json(assern_env, "status", "--config", str(config))
            assert [c["kind"] for c in status["clients"]] == ["stdio", "socket"]
            assert status["backends"][0]["pid"] == backend
            assert status["sockets"]["mcp"] == str(run / "assern.sock")
            if run.parent != assern_env.assern_home:  # pytest's tmp path is too long for a socket
                assert events(assern_env, "instance_socket_fallback", directory=str(run))
                assert stat.S_IMODE(run.parent.stat().st_mode) == 0o700

            # Private: the folder is 0700, the sockets 0600.
            assert stat.S_IMODE(run.stat().st_mode) == 0o700
            for name in ("assern.sock", "assern.ctl"):
                info = (run / name).stat()
                assert stat.S_ISSOCK(info.st_mode)
                assert stat.S_IMODE(info.st_mode) == 0o600

            # Transparent: progress, server-to-client requests and cancellation cross the proxy.
            done = await b.call_tool("alpha_progress", {"steps": 3}, progress_callback=on_progress)
            assert text_of(done) == "progressed"
            assert progress == [1, 2, 3]
            assert text_of(await b.call_tool("alpha_ask_sampling", {"prompt": "hi"})) == "from B"
            assert asked == ["hi"]
            marker = tmp_path / "cancelled"
            with trio.move_on_after(0.5):
                await b.call_tool("alpha_wait_cancel", {"marker": str(marker)})
            await wait_until(marker.exists)

            # The primary's own client leaves; the proxied one keeps the same backend.
            first.leave()
            await first.closed.wait()
            assert text_of(await b.call_tool("alpha_echo", {"text": "still here"})) == "still here"
            assert await get_pid(b) == backend
            second.leave()
    # The last client left: the instance withdraws its sockets and stops its backends.
    await wait_until(lambda: not (run / "assern.sock").exists() and not backend_pids(assern_env))


async def test_each_project_gets_its_own_primary_with_its_own_backends(assern_env: AssernEnv) -> None:
    work = assern_env.work
    (work / "one").mkdir()
    (work / "two").mkdir()
    (assern_env.assern_home / "config.toml").write_text(
        server_table("alpha")
        + 'env = { TAG = "global" }\n'
        + f'[projects.one]\ndirectories = ["{work}/one"]\nenv = {{ TAG = "one" }}\n'
        + f'[projects.two]\ndirectories = ["{work}/two"]\nenv = {{ TAG = "two" }}\n'
    )
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            sessions = [Session(serve_in(assern_env, work / name)) for name in ("one", "two")]
            clients = [await nursery.start(session.run) for session in sessions]
            tags = [text_of(await c.call_tool("alpha_get_env", {"name": "TAG"})) for c in clients]
            assert tags == ["one", "two"]
            pids = [await get_pid(c) for c in clients]
            assert pids[0] != pids[1]
            assert backend_pids(assern_env) == sorted(pids)
            run = socket_dir(assern_env)
            assert (run / "one.sock").exists()
            assert (run / "two.sock").exists()

            everything = await ctl_json(assern_env, "status", "--all")
            assert sorted(i["project"] for i in everything["instances"]) == ["one", "two"]
            here = await ctl_json(assern_env, "status", cwd=work / "two")
            assert here["project"] == "two"
            assert here["backends"][0]["pid"] == pids[1]
            for session in sessions:
                session.leave()


async def test_a_stale_socket_is_removed_and_the_next_start_becomes_primary(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo,get_pid"))
    run = socket_dir(assern_env)
    run.mkdir(mode=0o700, parents=True)
    for name in ("assern.sock", "assern.ctl"):  # what a killed primary leaves: bound, nobody listening
        left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        left.bind(str(run / name))
        left.close()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            client = await nursery.start(session.run)
            assert text_of(await client.call_tool("alpha_echo", {"text": "fresh"})) == "fresh"
            assert events(assern_env, "stale_socket_removed", slot="assern")
            assert events(assern_env, "instance_primary", slot="assern")
            status = await ctl_json(assern_env, "status", "--config", str(config))
            assert status["sockets"]["mcp"] == str(run / "assern.sock")
            assert status["backends"][0]["pid"] == await get_pid(client)
            session.leave()


async def test_racing_starts_elect_exactly_one_primary(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo,get_pid"))
    starts = 4
    pids: list[int] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            sessions = [Session(assern_env.serve(config)) for _ in range(starts)]
            ready = trio.Event()

            async def one(session: Session) -> None:
                client = await nursery.start(session.run)
                pids.append(await get_pid(client))
                if len(pids) == starts:
                    ready.set()

            for session in sessions:
                nursery.start_soon(one, session)
            await ready.wait()
            assert len(set(pids)) == 1
            assert backend_pids(assern_env) == pids[:1]
            assert len(events(assern_env, "instance_primary")) == 1
            assert len(events(assern_env, "instance_proxy")) == starts - 1
            for session in sessions:
                session.leave()


async def test_no_instance_sharing_runs_isolated_instances(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo,get_pid"))
    assern_env.env["ASSERN_NO_INSTANCE_SHARING"] = "1"
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            sessions = [Session(assern_env.serve(config)) for _ in range(2)]
            clients = [await nursery.start(session.run) for session in sessions]
            pids = [await get_pid(client) for client in clients]
            assert pids[0] != pids[1]
            assert backend_pids(assern_env) == sorted(pids)
            run = socket_dir(assern_env)
            assert not run.exists() or not list(run.glob("*.sock"))
            assert not events(assern_env, "instance_primary")
            status = await ctl(assern_env, "status", "--config", str(config))
            assert status.returncode == 1
            assert "no assern instance runs" in status.stderr.decode()
            for session in sessions:
                session.leave()


PEER_SCRIPT = """
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(sys.argv[1])
except OSError as exc:
    print("connect-error", exc.errno)
    raise SystemExit(0)
try:
    sock.sendall(sys.argv[2].encode() + b"\\n")
except OSError:
    pass  # refused before it read anything: its answer is already on the way
data = b""
try:
    while chunk := sock.recv(4096):
        data += chunk
except OSError:
    pass
print("answer", data.decode().strip())
"""


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can traverse (pytest's own tmp folders are private)."""
    base = Path(tempfile.mkdtemp(prefix="assern-peer-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def system_python() -> str | None:
    """A python3 outside root's home, which `nobody` can run."""
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None or Path(python).resolve().is_relative_to("/root"):
        return None
    return python


def as_nobody(python: str, path: Path, line: str) -> str:
    done = subprocess.run(
        [python, "-c", PEER_SCRIPT, str(path), line],
        user=65534,
        group=65534,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=20,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_a_connection_from_another_user_is_refused(assern_env: AssernEnv, shared_tmp: Path) -> None:
    # A real second user needs root: the kernel reports the client's real uid, which an
    # unprivileged user cannot change. Without root, the refusal itself is tested in
    # tests/actors/listener/test_peer_refusal.py (a foreign uid, real sockets).
    if os.geteuid() != 0:
        pytest.skip(
            "acting as a second user needs root (to run a client as `nobody`); "
            "test_peer_refusal.py tests the refusal without root"
        )
    python = system_python()
    if python is None:
        pytest.skip("no system python3 that the `nobody` user may run")
    home = shared_tmp / "home"
    home.mkdir()
    assern_env.env["ASSERN_HOME"] = str(home)
    assern_env.assern_home = home
    config = shared_tmp / "config.toml"
    config.write_text("[settings]\n")
    run = home / "run"
    with trio.fail_after(40):
        async with daemon(assern_env, "--config", str(config)) as process:
            await ctl_json(assern_env, "status", "--config", str(config))  # it answers us
            # The 0700 folder alone keeps the other user out ...
            answer = await trio.to_thread.run_sync(as_nobody, python, run / "assern.sock", "{}")
            assert answer.startswith("connect-error 13")  # EACCES
            # ... and with the folder and sockets opened up, the peer check still refuses.
            run.chmod(0o711)
            (run / "assern.sock").chmod(0o666)
            (run / "assern.ctl").chmod(0o666)
            ping = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
            answer = await trio.to_thread.run_sync(as_nobody, python, run / "assern.sock", ping)
            assert answer.startswith("answer ")
            assert "refused: this assern serves uid 0 only" in answer
            assert json.loads(answer.removeprefix("answer "))["id"] is None
            answer = await trio.to_thread.run_sync(
                as_nobody, python, run / "assern.ctl", '{"v": 1, "command": "status"}'
            )
            assert '"code": "forbidden"' in answer
            refused = events(assern_env, "connection_refused")
            assert {e["socket"] for e in refused} == {"mcp", "control"}
            assert {e["peer_uid"] for e in refused} == {65534}
            run.chmod(0o700)
            # Still serving its own user.
            stopped = await ctl(assern_env, "shutdown", "--config", str(config))
            assert stopped.returncode == 0, stopped.stderr.decode()
            assert await process.wait() == 0
