"""Helpers for the instance-sharing and control-plane tests: clients that come and go,
`assernctl` runs, and the processes that belong to one test's ASSERN_HOME.

Every wait is a poll with a bound (another process's life has no event to wait on) or
an event; the `reap` fixture kills whatever a failing test left running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def assernctl_command() -> str:
    found = shutil.which("assernctl", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("the `assernctl` console script is not installed beside this Python")
    return found


async def ctl(env: AssernEnv, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `assernctl ARGS` (bounded) and return what it printed."""
    with trio.fail_after(60):
        return await trio.run_process(
            [assernctl_command(), *args],
            env=env.env,
            cwd=str(cwd or env.work),
            check=False,
            capture_stdout=True,
            capture_stderr=True,
            stdin=subprocess.DEVNULL,
        )


async def ctl_json(env: AssernEnv, *args: str, cwd: Path | None = None) -> Any:
    done = await ctl(env, *args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def out(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode()


def err(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stderr.decode()


async def wait_until(check: Callable[[], Any], limit: float = 10.0, interval: float = 0.05) -> Any:
    """Poll `check` until it returns something true, at most `limit` seconds."""
    with trio.fail_after(limit):
        while not (value := check()):  # noqa: ASYNC110 - other processes' doings: nothing to wait on
            await trio.sleep(interval)
        return value


# ------------------------------------------------------------------ processes


async def in_flight(env: AssernEnv, folder: Path) -> None:
    """Until the daemon says a call is in flight."""
    while True:
        doc = (await ctl_json(env, "status", cwd=folder))["workstation"]["daemon"]
        if doc["calls_in_flight"]:
            return
        await trio.sleep(0.05)


def _environ_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _cmdline_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def pids_of(env: AssernEnv, fragment: str) -> list[int]:
    """Live processes of this test's ASSERN_HOME whose command line contains `fragment`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        ours = _environ_of(pid).get("ASSERN_HOME") == str(env.assern_home)
        if ours and fragment in _cmdline_of(pid) and _running(pid):
            found.append(pid)
    return sorted(found)


def socket_dir(env: AssernEnv) -> Path:
    """Where this test's instances put their sockets (pytest's long tmp paths fall back)."""
    from assern.app.instance import socket_directory

    return socket_directory(env.assern_home, env.env).path


def backend_pids(env: AssernEnv) -> list[int]:
    """The test servers running for this test (what a shared instance must not multiply)."""
    return pids_of(env, "testing_server.py")


def events(env: AssernEnv, name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e for e in env.log_events() if e.get("event") == name and all(e.get(k) == v for k, v in match.items())
    ]


@pytest.fixture(autouse=True)
def reap(assern_env: AssernEnv) -> Any:
    """Kill anything this test's ASSERN_HOME still runs when the test ends."""
    yield
    for pid in pids_of(assern_env, ""):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -------------------------------------------------------------------- clients


class Session:
    """One MCP client of `assern serve` in a task of its own, so tests can end it alone.

    `client = await nursery.start(session.run)` returns once the client is initialized;
    `session.leave()` ends it; `await session.closed.wait()` once it is gone.
    """

    def __init__(self, params: StdioServerParameters, **options: Any) -> None:
        self.params = params
        self.options = options
        self._leave = trio.Event()
        self.closed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[Client] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with Client(self.params, mode="legacy", **self.options) as client:
                task_status.started(client)
                await self._leave.wait()
        finally:
            self.closed.set()

    def leave(self) -> None:
        self._leave.set()


def serve_in(env: AssernEnv, cwd: Path, *args: str) -> StdioServerParameters:
    """`assern serve ARGS` started in `cwd` (project detection follows the directory)."""
    params = env.params("serve", *args)
    return params.model_copy(update={"cwd": str(cwd)})


async def stop_workstation(env: AssernEnv) -> None:
    """Stop the workstation daemon the test's `assern serve` started (what it keeps until it
    stops is saved then), and wait until it is gone; the next `assern serve` starts a new one."""
    from harness import stop_daemon

    await trio.to_thread.run_sync(stop_daemon, env)


async def start_daemon(env: AssernEnv, args: tuple[str, ...], *, stderr: int) -> trio.Process:
    """`assern daemon ARGS` started in the test's work folder (stdin and stdout closed)."""
    from harness import assern_command

    return await trio.lowlevel.open_process(
        [assern_command(), "daemon", *args],
        env=env.env,
        cwd=str(env.work),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


@asynccontextmanager
async def daemon(env: AssernEnv, *args: str) -> AsyncIterator[trio.Process]:
    """`assern daemon ARGS`, running once its control socket answers; killed if left over."""
    process = await start_daemon(env, args, stderr=subprocess.PIPE)
    try:
        await wait_until(lambda: events(env, "instance_primary"), limit=20)
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        if process.stderr is not None:
            await process.stderr.aclose()


@asynccontextmanager
async def workstation(env: AssernEnv, *args: str) -> AsyncIterator[trio.Process]:
    """`assern daemon ARGS` with no --config (the workstation daemon), once its control
    socket is there; stopped with SIGTERM (killed if that does not do) afterwards."""
    process = await start_daemon(env, args, stderr=subprocess.DEVNULL)
    try:
        await wait_until(lambda: events(env, "daemon_starting"), limit=30)
        await wait_until(lambda: (socket_dir(env) / "daemon.ctl").exists(), limit=10)
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            with trio.move_on_after(20):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
