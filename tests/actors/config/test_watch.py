"""The polling file watcher on a virtual clock over fake files."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import trio
import trio.testing

from assern.actors.config.watch import FileStamp, FileWatcher, changed_paths, stat_file

from .fakefs import FakeFiles

A = Path("/cfg/config.toml")
B = Path("/cfg/.env")
C = Path("/repo/.assern/config.toml")

Reports = list[tuple[tuple[Path, ...], float]]


def watcher_over(
    files: FakeFiles, paths: Callable[[], Iterable[Path]], *, max_delay: float = 5.0
) -> FileWatcher:
    watcher = FileWatcher(paths, stat=files.stat, interval=1.0, quiet=0.3, max_delay=max_delay)
    watcher.prime()
    return watcher


async def collect(watcher: FileWatcher, reports: Reports) -> None:
    while True:
        changed = await watcher.next_change()
        reports.append((changed, trio.current_time()))


def test_changed_paths_ignores_paths_new_to_the_set() -> None:
    one = FileStamp(mtime_ns=1, size=1, inode=1)
    two = FileStamp(mtime_ns=2, size=1, inode=1)
    assert changed_paths({A: one, B: None}, {A: two, B: None, C: one}) == (A,)
    assert changed_paths({A: one}, {A: one}) == ()
    assert changed_paths({A: None}, {A: one}) == (A,)  # created
    assert changed_paths({A: one}, {A: None}) == (A,)  # removed


def test_stat_file_reads_mtime_size_and_inode(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert stat_file(path) is None
    path.write_text("abc")
    stamp = stat_file(path)
    assert stamp is not None
    assert stamp.size == 3
    path.write_text("abcd")
    assert stat_file(path) != stamp


async def test_nothing_changes_nothing_is_reported(autojump_clock: trio.testing.MockClock) -> None:
    files = FakeFiles()
    files.write(A)
    watcher = watcher_over(files, lambda: [A, B])
    with trio.move_on_after(100) as scope:
        await watcher.next_change()
    assert scope.cancelled_caught
    assert files.stat_calls >= 2 * 99  # it did keep looking, once a second, at both paths


async def test_a_change_is_reported_after_one_poll_and_the_quiet_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    files = FakeFiles()
    files.write(A)
    watcher = watcher_over(files, lambda: [A, B])
    reports: Reports = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, watcher, reports)
        await trio.sleep(2.5)
        files.write(A, size=7)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    # polls at 1, 2, 3: the change is seen at 3 and stays still for 0.3 s
    [(paths, at)] = reports
    assert paths == (A,)
    assert at == pytest.approx(3.3)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda files: files.write(B), id="created"),
        pytest.param(lambda files: files.remove(A), id="removed"),
        pytest.param(lambda files: files.replace(A), id="renamed-over (new inode)"),
    ],
)
async def test_every_kind_of_change_counts(
    autojump_clock: trio.testing.MockClock, change: Callable[[FakeFiles], None]
) -> None:
    files = FakeFiles()
    files.write(A)
    watcher = watcher_over(files, lambda: [A, B])
    reports: Reports = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, watcher, reports)
        await trio.sleep(0.5)
        change(files)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert len(reports) == 1


async def test_a_burst_of_writes_is_one_report(autojump_clock: trio.testing.MockClock) -> None:
    """Ten writes 0.2 s apart (each within the quiet period of the one before): one report,
    0.3 s after the last write was seen, naming both files written."""
    files = FakeFiles()
    files.write(A)
    files.write(B)
    watcher = watcher_over(files, lambda: [A, B])
    reports: Reports = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, watcher, reports)
        await trio.sleep(2.5)
        for i in range(10):
            files.write(A if i % 2 else B, size=i)
            await trio.sleep(0.2)
        last_write = trio.current_time() - 0.2
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert len(reports) == 1
    changed, at = reports[0]
    assert set(changed) == {A, B}
    assert last_write < at <= last_write + 0.3 + 0.3 + 1e-9


async def test_a_file_that_never_settles_is_reported_after_max_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    files = FakeFiles()
    files.write(A)
    watcher = watcher_over(files, lambda: [A], max_delay=2.0)
    reports: Reports = []

    async def keep_writing() -> None:
        while True:
            files.write(A)
            await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, watcher, reports)
        await trio.sleep(0.5)
        nursery.start_soon(keep_writing)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    # seen at 1.0, reported by 1.0 + max_delay (rounded up to a quiet step), then again
    assert reports
    assert reports[0][1] == pytest.approx(3.1)


async def test_paths_joining_the_set_are_not_changes(autojump_clock: trio.testing.MockClock) -> None:
    """After a reload the watched set can grow (a new include); the newcomer is not a change,
    but a later change of it is."""
    files = FakeFiles()
    files.write(A)
    files.write(C)
    watched = [A]
    watcher = watcher_over(files, lambda: watched)
    reports: Reports = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, watcher, reports)
        await trio.sleep(1.5)
        watched.append(C)
        await trio.sleep(5)
        assert reports == []
        files.write(C, size=3)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert [changed for changed, _ in reports] == [(C,)]
