"""`assernctl logs`: readable or raw lines, filters, and following across rotation."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, server_table
from instances import (
    Session,
    assernctl_command,
    ctl,
    out,
    reap,  # noqa: F401 - autouse fixture
    text_of,
)

pytestmark = pytest.mark.e2e


def line(event: str, level: str = "info", server: str | None = None, **more: Any) -> str:
    record: dict[str, Any] = {"event": event, "level": level, "ts": "2026-01-02T03:04:05.678901Z"}
    if server is not None:
        record["server"] = server
    record |= more
    return json.dumps(record) + "\n"


def append(path: Path, *lines: str) -> None:
    with path.open("a") as handle:
        handle.write("".join(lines))


class Tail:
    """A running `assernctl logs …` whose output is read line by line."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""

    async def next_line(self) -> str:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(65536)
            assert chunk, "assernctl logs stopped"
            self._buffer += chunk
        first, self._buffer = self._buffer.split(b"\n", 1)
        return first.decode()


async def start_tail(env: AssernEnv, *args: str) -> Tail:
    process = await trio.lowlevel.open_process(
        [assernctl_command(), "logs", *args],
        env=env.env,
        cwd=str(env.work),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        preexec_fn=interruptible,
    )
    return Tail(process)


def interruptible() -> None:
    """In the follower's process before its exec: SIGINT as a terminal gives it, whatever
    the test process's state (an ignored or blocked signal is inherited across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


async def stop_tail(tail: Tail) -> None:
    """Ctrl-C: the follower exits 0. One that does not is killed and its signal state
    (from /proc) reported, with the test process's."""
    tail.process.send_signal(signal.SIGINT)
    with trio.move_on_after(10) as waiting:
        code = await tail.process.wait()
    assert tail.process.stdout is not None
    if waiting.cancelled_caught:
        state = signal_state(tail.process.pid)
        tail.process.kill()
        with trio.CancelScope(shield=True):
            await tail.process.wait()
            await tail.process.stdout.aclose()
        mine = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
        pytest.fail(f"`assernctl logs -f` ignored SIGINT for 10 s: {state}; the test process: {mine}")
    await tail.process.stdout.aclose()
    assert code == 0


def signal_state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        return str(exc)
    return " ".join(line for line in status.splitlines() if line.startswith(("State", "Sig", "Shd")))


async def test_logs_follow_new_events_across_rotation_with_filters(assern_env: AssernEnv) -> None:
    logs = assern_env.assern_home / "logs"
    logs.mkdir()
    log = logs / "assern.log"
    append(log, line("old_info", server="alpha"), line("old_warning", "warning", "alpha", detail="a b"))
    with trio.fail_after(20):
        tail = await start_tail(assern_env, "-f", "--server", "alpha", "--level", "warning")
        try:
            # The existing matching line first: the follower runs from here on.
            first = await tail.next_line()
            assert first.startswith("2026-01-02 03:04:05.678 WARNING old_warning [alpha]")
            assert 'detail="a b"' in first
            append(
                log,
                line("new_info", "info", "alpha"),
                line("other_server", "error", "beta"),
                line("new_error", "error", "alpha", code=7),
            )
            assert "new_error [alpha]  code=7" in await tail.next_line()
            # Rotation, as the writer does it: rename to .1, start a new file.
            append(log, line("before_rotation", "warning", "alpha"))
            log.rename(logs / "assern.log.1")
            append(log, line("after_rotation", "critical", "alpha"))
            assert "before_rotation" in await tail.next_line()
            assert "CRITICAL after_rotation [alpha]" in await tail.next_line()
        finally:
            await stop_tail(tail)

    # Without -f: the last lines of every file, oldest first; --json prints them raw.
    raw = await ctl(assern_env, "logs", "--json", "-n", "3", "--level", "warning")
    assert [json.loads(text)["event"] for text in out(raw).splitlines()] == [
        "new_error",
        "before_rotation",
        "after_rotation",
    ]
    grep = await ctl(assern_env, "logs", "-n", "-1", "--grep", "OTHER_SERVER")
    assert [text.split()[3] for text in out(grep).splitlines()] == ["other_server"]
    bad = await ctl(assern_env, "logs", "--level", "loud")
    assert bad.returncode == 2


async def test_logs_follow_shows_a_running_instances_new_events(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo") + server_table("beta", "--tools", "echo"))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            client = await nursery.start(session.run)
            await client.call_tool("alpha_echo", {"text": "one"})
            tail = await start_tail(
                assern_env, "-f", "-n", "1", "--json", "--server", "alpha", "--grep", "tool_call_finished"
            )
            try:
                assert json.loads(await tail.next_line())["event"] == "tool_call_finished"
                await client.call_tool("beta_echo", {"text": "not shown"})
                assert text_of(await client.call_tool("alpha_echo", {"text": "two"})) == "two"
                event = json.loads(await tail.next_line())
                assert event["event"] == "tool_call_finished"
                assert event["server"] == "alpha"
                assert event["tool"] == "echo"
            finally:
                await stop_tail(tail)
            session.leave()
