"""Child processes: own process group, the bounded stop ladder, and the orphan sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from assern.supervisor.io.process import (
    PidRegistry,
    group_members,
    pdeathsig_launcher,
    process_alive,
    process_start_time,
    spawn,
    stop_process,
    sweep_orphans,
)

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def test_a_child_leads_its_own_process_group() -> None:
    child = spawn(["sleep", "30"], env=ENV)
    try:
        assert os.getpgid(child.pid) == child.pid
        assert os.getpgid(child.pid) != os.getpgid(0)
    finally:
        with trio.fail_after(10):
            await stop_process(child, grace=0.1, term_timeout=1)
    assert not alive(child.pid)


async def test_stdin_eof_is_the_first_rung() -> None:
    child = spawn(["cat"], env=ENV)  # cat exits on stdin EOF
    with trio.fail_after(10):
        assert await stop_process(child, grace=5, term_timeout=5) == 0


async def test_a_child_that_ignores_sigterm_is_killed_with_its_group() -> None:
    script = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "p = subprocess.Popen(['sleep', '60'])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = spawn([sys.executable, "-c", script], env=ENV)
    with trio.fail_after(10):
        line = await child.stdout.receive_some(100)
        grandchild = int(line.decode().strip())
        code = await stop_process(child, grace=0.1, term_timeout=0.5)
    assert code == -signal.SIGKILL
    with trio.fail_after(5):
        while alive(grandchild):  # noqa: ASYNC110 - waiting for the kernel to reap
            await trio.sleep(0.02)


#: both ways of arming the parent-death signal: util-linux's setpriv (vfork), a preexec hook (fork)
LAUNCHERS = [
    pytest.param(
        None,
        id="setpriv",
        marks=pytest.mark.skipif(pdeathsig_launcher() is None, reason="no setpriv --pdeathsig here"),
    ),
    pytest.param((), id="preexec"),
]

PARENT = """
import sys
from assern.supervisor.io.process import spawn
launcher = None if sys.argv[1] == "default" else ()
child = spawn(["sleep", "60"], env={"PATH": sys.argv[2]}, launcher=launcher)
print(child.pid, flush=True)
sys.stdin.read()  # until the test kills us
"""


def wait_until(condition: Callable[[], bool], limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"still not so after {limit} s"
        time.sleep(0.02)


def cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_child_that_never_reads_stdin_dies_with_a_killed_parent(launcher: tuple[str, ...] | None) -> None:
    """`sleep` ignores stdin EOF: only the parent-death signal ends it when the parent dies."""
    which = "default" if launcher is None else "preexec"
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, which, ENV["PATH"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as parent:
        try:
            assert parent.stdout is not None
            child = int(parent.stdout.readline())
            # the command itself runs (a launcher has exec'd it), with its argv unchanged
            wait_until(lambda: cmdline(child) == [b"sleep", b"60"])
        finally:
            parent.kill()
    wait_until(lambda: not alive(child))


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_command_that_cannot_run_is_an_error_at_spawn(
    launcher: tuple[str, ...] | None, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError):
        spawn(["no-such-command-anywhere"], env=ENV, launcher=launcher)
    with pytest.raises(FileNotFoundError):
        spawn([str(tmp_path / "missing")], env=ENV, launcher=launcher)
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        spawn([str(script)], env=ENV, launcher=launcher)


@pytest.mark.parametrize("launcher", LAUNCHERS)
async def test_the_command_gets_its_argv_and_pipes_whichever_way_it_starts(
    launcher: tuple[str, ...] | None,
) -> None:
    child = spawn(
        [sys.executable, "-c", "import sys; print(sys.argv[1:], sys.stdin.read())", "a b", "c"],
        env=ENV,
        launcher=launcher,
    )
    with trio.fail_after(10):
        await child.stdin.send_all(b"in")
        await child.stdin.aclose()
        out = b""
        while chunk := await child.stdout.receive_some(100):
            out += chunk
        assert await stop_process(child, grace=5, term_timeout=5) == 0
    assert out == b"['a b', 'c'] in\n"


def test_the_sweep_kills_groups_of_a_dead_owner_only(tmp_path: Path) -> None:
    leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)
    ours = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        # A registry of a dead assern (a pid that cannot be running) ...
        dead = {
            "owner": {"pid": 2**22 + 7, "start": 1},
            "groups": {"x": {"pgid": leftover.pid, "start": process_start_time(leftover.pid)}},
        }
        (tmp_path / f"{2**22 + 7}.json").write_text(json.dumps(dead))
        # ... and the live one of this process.
        registry = PidRegistry(tmp_path)
        registry.record("y", ours.pid)
        assert group_members(leftover.pid) == [leftover.pid]

        killed = sweep_orphans(tmp_path)

        assert killed == [leftover.pid]
        assert leftover.wait(timeout=5) == -signal.SIGKILL
        assert ours.poll() is None
        assert not (tmp_path / f"{2**22 + 7}.json").exists()
        assert registry.path.exists()
        registry.record("y", None)
        assert json.loads(registry.path.read_text())["groups"] == {}
        registry.close()
        assert not registry.path.exists()
    finally:
        for proc in (leftover, ours):
            proc.kill()
            proc.wait()


REAPER = Path(__file__).resolve().parents[3] / "supervisor" / "io" / "reaper.py"


def _owner_and_group(tmp_path: Path) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], Path]:
    """An owner process, a group it "started", and its registry."""
    owner = subprocess.Popen(["sleep", "60"])
    group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    registry = tmp_path / f"{owner.pid}.json"
    document = {
        "owner": {"pid": owner.pid, "start": process_start_time(owner.pid)},
        "groups": {"x": {"pgid": group.pid, "start": process_start_time(group.pid)}},
    }
    registry.write_text(json.dumps(document))
    return owner, group, registry


def _watchdog(registry: Path, owner: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(REAPER), str(registry), str(owner)], stdin=subprocess.PIPE
    )


def test_the_watchdog_kills_the_groups_once_its_owner_is_gone(tmp_path: Path) -> None:
    owner, group, registry = _owner_and_group(tmp_path)
    try:
        watchdog = _watchdog(registry, owner.pid)
        assert watchdog.stdin is not None
        watchdog.stdin.close()  # the pipe ends as it does when the owner dies ...
        time.sleep(0.2)
        assert group.poll() is None  # ... but the owner still runs: nothing yet
        owner.kill()
        owner.wait()
        assert watchdog.wait(timeout=5) == 0
        assert group.wait(timeout=5) == -signal.SIGKILL
        assert not registry.exists()
    finally:
        for proc in (owner, group):
            proc.kill()
            proc.wait()


def test_a_watchdog_told_done_leaves_everything_alone(tmp_path: Path) -> None:
    owner, group, registry = _owner_and_group(tmp_path)
    try:
        watchdog = _watchdog(registry, owner.pid)
        assert watchdog.stdin is not None
        watchdog.stdin.write(b"done\n")
        watchdog.stdin.close()
        owner.kill()
        owner.wait()
        assert watchdog.wait(timeout=5) == 0
        assert group.poll() is None
        assert registry.exists()
    finally:
        for proc in (owner, group):
            proc.kill()
            proc.wait()


def test_a_registry_guarded_and_closed_leaves_no_watchdog(tmp_path: Path) -> None:
    registry = PidRegistry(tmp_path)
    pid = registry.guard()
    assert process_alive(pid)
    registry.close()
    assert not process_alive(pid)
