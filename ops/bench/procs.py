"""Process facts from /proc (Linux): descendants, resident memory, identities.

A process is identified by (pid, start time) so that a recycled pid is never mistaken
for one we started. Nothing here signals a process that is not such an identity.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import attrs
import trio

PROC = Path("/proc")


@attrs.frozen
class Ident:
    pid: int
    start: int  # clock ticks since boot (/proc/PID/stat field 22)


def _read(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its end.
    return text[text.rindex(")") + 2 :].split()


def ident(pid: int) -> Ident | None:
    fields = _stat_fields(pid)
    return Ident(pid, int(fields[19])) if fields else None


def alive(who: Ident) -> bool:
    fields = _stat_fields(who.pid)
    return fields is not None and int(fields[19]) == who.start and fields[0] != "Z"


def cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _children_map() -> dict[int, list[int]]:
    """Every process's children, from one pass over all of /proc (the slow way)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _children_of(pid: int) -> list[int]:
    """`pid`'s children from /proc/PID/task/TID/children: each thread lists the children
    it started (a process that spawns from worker threads has them under several)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        text = _read(f"/proc/{pid}/task/{tid}/children")
        if text:
            found.extend(int(child) for child in text.split())
    return found


def _children_files() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def descendants(root: int) -> list[int]:
    """Every live descendant of `root` (not `root` itself), parents before children.

    Where the kernel keeps children lists (CONFIG_PROC_CHILDREN) this reads only the
    tree's own files: the memory sampling of several trees every 100 ms must not cost
    the harness, which is also the client being timed, a core of its own. Elsewhere it
    reads every process's stat.
    """
    return [pid for pid, _ in descendants_with_parents(root)]


def descendants_with_parents(root: int) -> list[tuple[int, int]]:
    """(pid, parent pid) of every live descendant of `root`, parents before children."""
    children_of: Callable[[int], list[int]]
    if _children_files():
        children_of = _children_of
    else:
        table = _children_map()

        def children_of(pid: int) -> list[int]:
            return table.get(pid, [])

    found: list[tuple[int, int]] = []
    todo = [(child, root) for child in children_of(root)]
    while todo:
        pid, parent = todo.pop(0)
        found.append((pid, parent))
        todo.extend((child, pid) for child in children_of(pid))
    return found


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def rss_kb(pid: int) -> int:
    return _status_kb(pid, "VmRSS")


def pss_kb(pid: int) -> int:
    """Proportional set size: the process's resident pages, each shared page divided
    among the processes that map it (/proc/PID/smaps_rollup); 0 when unreadable."""
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def peak_rss_kb(pid: int) -> int:
    """The kernel's high-water mark of the process's resident set (VmHWM)."""
    return _status_kb(pid, "VmHWM")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far (0 when it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # utime and stime are fields 14 and 15 of /proc/PID/stat; `fields` starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_backend(root: int, name: str) -> int | None:
    """The pid of the bench backend started with `--name NAME` under `root`, if any."""
    for pid in descendants(root):
        argv = cmdline(pid)
        if any(arg.endswith("bench_server.py") for arg in argv) and _flag(argv, "--name") == name:
            return pid
    return None


def _flag(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg == flag:
            return argv[i + 1]
    return None


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def cpu_times() -> tuple[int, int] | None:
    """(idle, total) clock ticks of all CPUs since boot (/proc/stat), or None."""
    try:
        fields = [int(v) for v in (PROC / "stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return idle, sum(fields)


def wait_quiet_blocking(limit: float, idle_share: float = 0.9, window: float = 0.25) -> float:
    """Block until the machine's CPUs were at least `idle_share` idle over one `window`
    (what the previous step left running has wound down), for at most `limit` s.

    Returns the seconds waited; without /proc/stat, returns at once.
    """
    began = time.monotonic()
    before = cpu_times()
    while before is not None and time.monotonic() - began < limit:
        time.sleep(window)
        after = cpu_times()
        if after is None:
            break
        idle, total = after[0] - before[0], after[1] - before[1]
        if total > 0 and idle / total >= idle_share:
            break
        before = after
    return time.monotonic() - began


async def wait_quiet(limit: float, idle_share: float = 0.9, window: float = 0.25) -> float:
    """`wait_quiet_blocking` in a worker thread, for the harness's trio tasks."""
    return await trio.to_thread.run_sync(wait_quiet_blocking, limit, idle_share, window)


class TreeWatch:
    """Samples a process tree's resident memory and remembers every member it saw.

    `peak_tree_kb` is the largest sum of VmRSS over the root and its descendants at one
    sampling instant (every `interval` s while `run` runs); `peak_members` says what
    made it up: (pid, the command line's last 60 characters, VmRSS kB) per member.

    A descendant that still has its parent's command line is a fork that has not
    exec'd yet (a spawn caught before its exec, or a backend forking to run a helper
    such as `ldconfig`): its resident pages are its parent's, so it is not added again.
    Counted, one such sample had added a whole backend (about 68 MB) to the sum, under
    any aggregator, whenever a 100 ms sample met one.
    """

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root = root
        self.interval = interval
        self.peak_tree_kb = 0
        self.peak_members: list[tuple[int, str, int]] = []
        self._paused = False
        self.seen: dict[int, Ident] = {}
        self.sample()

    def sample(self) -> None:
        tree = descendants_with_parents(self.root)
        members = [self.root, *(pid for pid, _ in tree)]
        for pid in members:
            if pid not in self.seen and (who := ident(pid)) is not None:
                self.seen[pid] = who
        lines = {pid: cmdline(pid) for pid in members}
        unforked = [self.root, *(pid for pid, parent in tree if lines[pid] != lines.get(parent))]
        sizes = [(pid, rss_kb(pid)) for pid in unforked]
        total = sum(kb for _, kb in sizes)
        if total > self.peak_tree_kb:
            self.peak_tree_kb = total
            self.peak_members = [(pid, " ".join(lines[pid])[-60:], kb) for pid, kb in sizes]

    async def run(self) -> None:
        while True:
            if not self._paused:
                self.sample()
            await trio.sleep(self.interval)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Sample once now and once at the end, but not in between.

        A sample reads three files per member (1.8 ms at K=20) in the harness, which is
        also the client being timed: every 100 ms it had delayed whichever call was in
        flight by that much, about ten of each 1000, which is where a p99 sits.
        """
        self.sample()
        self._paused = True
        try:
            yield
        finally:
            self._paused = False
            self.sample()

    def survivors(self) -> list[Ident]:
        return [who for who in self.seen.values() if alive(who)]


async def reap(members: Iterable[Ident], grace: float) -> list[Ident]:
    """Wait up to `grace` s for `members` to exit, then SIGKILL the ones left.

    Returns the members that were still alive when the grace ran out.
    """
    members = list(members)
    with trio.move_on_after(grace):
        # Polling /proc: the members are not our children, there is nothing to wait on.
        while any(alive(who) for who in members):  # noqa: ASYNC110
            await trio.sleep(0.05)
    left = [who for who in members if alive(who)]
    for who in left:
        try:
            os.kill(who.pid, signal.SIGKILL)
        except OSError:
            pass
    return left
