"""The benchmark's process-tree walk (ops/bench/procs.py): both ways find the same tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops" / "bench"))
import procs

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def kill_tree(root: subprocess.Popen[bytes]) -> None:
    """SIGKILL `root` and every descendant it left."""
    for pid in procs.descendants(root.pid):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    root.kill()


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    """A shell with two children, one of which has a child of its own."""
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait"])
    try:
        deadline = time.monotonic() + 5
        while len(procs._children_map().get(shell.pid, [])) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # the inner shell starts its sleep
        yield shell
    finally:
        kill_tree(shell)
        shell.wait()


def test_the_children_files_and_the_full_scan_find_the_same_tree(
    tree: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = procs.descendants(tree.pid)
    assert sorted(procs.cmdline(pid)[0] for pid in found) == ["sh", "sleep", "sleep"]
    # The inner shell comes before its own child: parents before children.
    inner = next(pid for pid in found if procs.cmdline(pid)[0] == "sh")
    assert found.index(inner) < max(found.index(pid) for pid in found if pid != inner)
    monkeypatch.setattr(procs, "_children_files", lambda: False)
    assert sorted(procs.descendants(tree.pid)) == sorted(found)


def test_a_process_without_children_has_no_descendants() -> None:
    leaf = subprocess.Popen(["sleep", "30"])
    try:
        assert procs.descendants(leaf.pid) == []
    finally:
        leaf.kill()
        leaf.wait()


def test_a_gone_process_has_no_descendants() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert procs.descendants(gone.pid) == []


FORKER = """
import os, subprocess, sys, time
ballast = b"x" * (30 * 1024 * 1024)  # resident: a forked copy would add it again
child = subprocess.Popen(["sleep", "30"])  # exec'd: its own memory, counted
copy = os.fork()  # not exec'd: the same pages, not counted again
if copy == 0:
    time.sleep(30)
    os._exit(0)
print(child.pid, copy, flush=True)
time.sleep(30)
"""


def test_the_tree_sum_counts_a_fork_that_has_not_execd_once() -> None:
    with subprocess.Popen([sys.executable, "-c", FORKER], stdout=subprocess.PIPE) as forker:
        try:
            assert forker.stdout is not None
            sleeper, copy = (int(v) for v in forker.stdout.readline().split())
            watch = procs.TreeWatch(forker.pid)
            assert copy in procs.descendants(forker.pid)  # there, but left out of the sum
            members = {pid: (command, kb) for pid, command, kb in watch.peak_members}
            assert set(members) == {forker.pid, sleeper}
            assert members[sleeper][0] == "sleep 30"
            assert members[forker.pid][1] > 30 * 1024
            assert watch.peak_tree_kb == sum(kb for _, kb in members.values())
        finally:
            kill_tree(forker)


async def test_a_paused_watch_samples_at_its_edges_only(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = procs.TreeWatch(os.getpid(), interval=0.1)
    times: list[float] = []
    monkeypatch.setattr(watch, "sample", lambda: times.append(trio.current_time()))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        await trio.sleep(0.25)  # samples at 0, 0.1, 0.2
        with watch.paused():  # one at 0.25 on the way in ...
            await trio.sleep(1.0)
        # ... one at 1.25 on the way out, and the periodic ones go on
        await trio.sleep(0.2)
        nursery.cancel_scope.cancel()
    assert times == pytest.approx([0.0, 0.1, 0.2, 0.25, 1.25, 1.3, 1.4])
