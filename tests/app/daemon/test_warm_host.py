"""A successor's warming, with two daemon hosts in one process on real sockets and a real
backend: what it warms for a session that never moves is not kept past the view grace."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio
from harness import server_table

from assern.app.daemon.hello import hello_line
from assern.app.daemon.host import DaemonHost
from assern.app.daemon.launch import alive
from assern.app.daemon.start import Supersede, claim

pytestmark = pytest.mark.e2e  # real MCP servers (the daemons run in this process)

#: Seconds the successor keeps a view no session uses (short: the test waits for it).
GRACE = 0.5


def ready_pid(host: DaemonHost, name: str) -> int | None:
    """The pid of `host`'s backend `name` once it is ready."""
    for backend in host.status()["backends"]:
        if backend["name"] == name and backend["state"] == "ready":
            pid = backend["pid"]
            return pid if isinstance(pid, int) else None
    return None


async def until(check: object, limit: float = 30.0) -> None:
    """Wait (bounded) until `check()` is true: the hosts' doings, seen by polling."""
    assert callable(check)
    with trio.fail_after(limit):
        while not check():  # noqa: ASYNC110 - another host's state: nothing to wait on
            await trio.sleep(0.02)


async def test_a_warmed_view_that_no_session_joins_stops_with_its_backend_after_the_grace(
    tmp_path: Path,
) -> None:
    home, user, work = tmp_path / "assern-home", tmp_path / "home", tmp_path / "work"
    for folder in (home, user, work):
        folder.mkdir()
    (home / "config.toml").write_text(server_table("alpha"))
    environ = {"HOME": str(user), "ASSERN_HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    environ["ASSERN_PYTHON"] = sys.executable
    first = await trio.to_thread.run_sync(claim, home, environ)
    assert first.mcp is not None
    assert first.control is not None
    old = DaemonHost(
        assern_home=home,
        mcp=first.mcp,
        control=first.control,
        mcp_path=first.slot.mcp,
        control_path=first.slot.control,
        build="0.1.0+old",
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(old.run)
        # A session whose `assern serve` resumes, but that never moves when told.
        stream = await trio.open_unix_socket(str(first.slot.mcp))
        flags = {"config": None, "project": None, "profile": None}
        hello = hello_line(cwd=str(work), environ=environ, **flags, build="0.1.0+old", resumes=True)
        await stream.send_all(hello)
        welcome = json.loads((await stream.receive_some(65536)).split(b"\n")[0])
        assert welcome["method"] == "assern/welcome"
        await until(lambda: ready_pid(old, "alpha") is not None)
        old_pid = ready_pid(old, "alpha")

        takeover = Supersede(build="0.1.0+new", reason="a test", deadline=60.0)
        taken = await trio.to_thread.run_sync(claim, home, environ, takeover)
        assert taken.takeover is not None
        assert taken.mcp is None  # the sockets stay the running daemon's until it warmed
        new = DaemonHost(
            assern_home=home,
            mcp=None,
            control=None,
            mcp_path=taken.slot.mcp,
            control_path=taken.slot.control,
            build="0.1.0+new",
            generation=2,
            takeover=taken.takeover,
            view_grace=GRACE,
        )
        await nursery.start(new.run)
        warmed = new.warmed
        assert warmed is not None
        assert (warmed["views"], warmed["sessions"], warmed["backends"], warmed["not_warm"]) == (1, 1, 1, [])
        warm_pid = ready_pid(new, "alpha")
        assert warm_pid not in (None, old_pid)
        assert old.superseded is not None
        assert old.superseded["build"] == "0.1.0+new"

        # No session ever joins the warmed view: it stops after the grace, its backend too.
        await until(lambda: not new.views and not new.pool.shared())
        assert warm_pid is not None
        await until(lambda: not alive(warm_pid))

        await stream.aclose()  # the session leaves the old daemon, whose drain then ends
        await until(lambda: old_pid is not None and not alive(old_pid))
        new.shutdown("the test ends")
