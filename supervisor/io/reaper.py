"""Killing the process groups a dead supervisor left behind, and the watchdog that does it.

A supervisor records the process group of every child it starts in a registry file
(`PidRegistry`, process.py). The parent-death signal reaches a child, not the
grandchildren it started (`sh -c 'daemon & exec server'`, npx, uvx): those live on in
the child's process group. Two things remove them when the supervisor dies, whatever
killed it:

- the **watchdog**: a tiny process the supervisor starts beside its children (`python
  -I -S reaper.py REGISTRY OWNER-PID`), in a session of its own so that a signal to the
  supervisor's terminal or group does not reach it. It holds one end of a pipe whose
  other end only the supervisor holds; when the pipe ends (the supervisor exited, even
  by SIGKILL), it waits for the owner to be gone, kills every recorded group's members
  and exits. A supervisor that stops normally says `done` first: nothing to do.
- the **sweep** at the next start (`sweep_orphans`), for a registry whose watchdog
  died too.

Both kill only processes of a recorded group that started no earlier than the group's
leader, so a recycled group id of an unrelated program is left alone. This module
imports nothing but the standard library: it runs as a script, without site-packages.
On a system without /proc (macOS) members cannot be listed: a recorded group is then
signalled as a whole, which can only miss a program that reused the group id within
the moment between the owner's death and the kill.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

#: How long the watchdog waits for its owner to be gone after the pipe ended.
OWNER_GRACE = 2.0


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (field 3 on), or None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields


def _process_group(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[2]) if fields is not None else None


def group_members(pgid: int, *, started_after: int | None = None) -> list[int]:
    """Pids in process group `pgid` (Linux /proc), optionally only those started later."""
    members: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return members
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if _process_group(pid) != pgid:
            continue
        start = process_start_time(pid)
        if started_after is not None and start is not None and start < started_after:
            continue
        members.append(pid)
    return members


def process_alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie (dead, waiting for a parent that does not reap) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not (Path("/proc").is_dir() and _stat_fields(pid) is None)


def owner_alive(owner: dict[str, int | None]) -> bool:
    """Whether the supervisor that wrote a registry still runs (the same process, by start time)."""
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return True
    if not process_alive(pid):
        return False
    start = owner.get("start")
    return start is None or process_start_time(pid) == start


def sweep_registry(path: Path) -> list[int]:
    """Kill the recorded groups of one registry whose owner is gone; returns the pids.

    The registry file is removed once swept (or when it cannot be read). A registry
    whose owner still runs is left as it is.
    """
    killed: list[int] = []
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return killed
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return killed
    if owner_alive(data.get("owner", {})):
        return killed
    listable = Path("/proc").is_dir()
    for group in data.get("groups", {}).values():
        pgid, start = group.get("pgid"), group.get("start")
        if not isinstance(pgid, int):
            continue
        if not listable:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
            continue
        for pid in group_members(pgid, started_after=start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    path.unlink(missing_ok=True)
    return killed


def sweep_orphans(directory: Path) -> list[int]:
    """Sweep every registry in `directory` whose owner is gone; returns the pids killed."""
    killed: list[int] = []
    if directory.is_dir():
        for path in sorted(directory.glob("*.json")):
            killed += sweep_registry(path)
    return killed


def watch(registry: Path, owner: int) -> None:
    """The watchdog: wait for the pipe on stdin to end, then sweep `registry`.

    A `done` line means the owner stopped its children itself: nothing to sweep.
    """
    for line in sys.stdin.buffer:
        if line.strip() == b"done":
            return
    deadline = time.monotonic() + OWNER_GRACE
    while process_alive(owner) and time.monotonic() < deadline:
        time.sleep(0.01)
    sweep_registry(registry)


if __name__ == "__main__":
    # Neither a signal to the owner's terminal nor its group may stop the watchdog.
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    watch(Path(sys.argv[1]), int(sys.argv[2]))
