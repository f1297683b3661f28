"""The file watcher keeps the index current: new, changed, renamed and deleted files, new
folders, ignore files and bursts, with no watch on ignored folders."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import watchfiles

from assern.context.scan import ScanRules
from assern.context.server import BURST, ContextServer, classify


async def _until(check: Callable[[], Any], limit: float = 20.0) -> Any:
    """Poll `check` until it holds: the events come from the OS, in real time."""
    with trio.fail_after(limit):
        while not (value := check()):  # noqa: ASYNC110 - the kernel's doings: nothing to wait on
            await trio.sleep(0.05)
        return value


def _where(server: ContextServer, name: str) -> list[str]:
    answer = server.engine.semantic_search(name, top_k=10, path=None)
    assert answer.structured is not None
    return sorted(r["path"] for r in answer.structured["results"] if name in r["text"])


async def test_the_watcher_keeps_the_index_current(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "a.py").write_text("def first_function():\n    pass\n")
    server = ContextServer(root, ScanRules(), tmp_path / "db.sqlite3")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            await _until(lambda: server.state.watching)
            assert server.folders == [""]  # node_modules/ is no watched folder

            (root / "b.py").write_text("def fresh_function():\n    pass\n")
            await _until(lambda: _where(server, "fresh_function") == ["b.py"])

            (root / "b.py").write_text("def edited_function():\n    pass\n")
            await _until(lambda: _where(server, "edited_function") == ["b.py"])
            assert _where(server, "fresh_function") == []

            (root / "b.py").rename(root / "c.py")
            await _until(lambda: _where(server, "edited_function") == ["c.py"])

            (root / "c.py").unlink()
            await _until(lambda: _where(server, "edited_function") == [])

            # a new folder is walked and watched from then on
            (root / "pkg").mkdir()
            (root / "pkg" / "d.py").write_text("def nested_function():\n    pass\n")
            await _until(lambda: _where(server, "nested_function") == ["pkg/d.py"])
            await _until(lambda: "pkg" in server.folders)
            (root / "pkg" / "e.py").write_text("def later_function():\n    pass\n")
            await _until(lambda: _where(server, "later_function") == ["pkg/e.py"])

            # ignored and secret files stay out
            (root / "node_modules" / "lib" / "x.js").write_text("function ignored_function() {}\n")
            (root / ".env").write_text("secret_function=1\n")
            # an ignore file takes effect at once
            (root / ".gitignore").write_text("a.py\n")
            await _until(lambda: _where(server, "first_function") == [])
            assert _where(server, "ignored_function") == []
            assert _where(server, "secret_function") == []

            # a burst (a checkout of many files) comes as few batches
            for i in range(BURST + 50):
                (root / "pkg" / f"burst_{i}.py").write_text(f"def burst_function_{i}():\n    pass\n")
            await _until(lambda: server.store.counts()[0] == BURST + 50 + 3)
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()


def test_classify_asks_for_a_walk_only_when_needed(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    modified = watchfiles.Change.modified
    watched = {str(tmp_path), str(tmp_path / "gone")}

    def events(*names: str) -> set[tuple[watchfiles.Change, str]]:
        return {(modified, str(tmp_path / name)) for name in names}

    assert classify(tmp_path, events("a.py", "b/c.py"), watched) == (["a.py", "b/c.py"], False)
    assert classify(tmp_path, events("a.py", ".gitignore"), watched)[1] is True
    assert classify(tmp_path, events("sub"), watched)[1] is True  # a folder came
    assert classify(tmp_path, events("gone"), watched)[1] is True  # a watched folder went
    assert classify(tmp_path, events(*(f"f{i}" for i in range(BURST + 1))), watched)[1] is True
    assert classify(tmp_path, {(modified, str(tmp_path.parent / "x"))}, watched) == ([], False)


async def test_a_file_saved_while_the_watcher_starts_is_not_missed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("def first_function():\n    pass\n")
    server = ContextServer(root, ScanRules(), tmp_path / "db.sqlite3")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.keep_index)
            # the folders are walked, the watches are not in place yet: save a file now
            with trio.fail_after(20):
                while not server.folders:  # as soon as it is so
                    await trio.lowlevel.checkpoint()
            assert not server.state.watching
            assert not server.state.ready
            (root / "pkg").mkdir()
            (root / "pkg" / "b.py").write_text("def first_racer():\n    pass\n")
            (root / "c.py").write_text("def second_racer():\n    pass\n")
            await _until(lambda: server.state.ready)
            assert server.engine.index_info()["pending"] == 0
            assert _where(server, "first_racer") == ["pkg/b.py"]
            assert _where(server, "second_racer") == ["c.py"]
            nursery.cancel_scope.cancel()
    finally:
        server.store.close()


async def test_a_file_saved_while_a_new_folder_is_being_watched_is_not_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new folder means new watches; a file saved in it before they are in place (the
    window is held open here for a second) is found all the same."""
    real_awatch = watchfiles.awatch
    started = 0

    def late_awatch(*paths: str, **options: Any) -> AsyncIterator[set[tuple[watchfiles.Change, str]]]:
        nonlocal started
        started += 1
        first = started == 1

        async def events() -> AsyncIterator[set[tuple[watchfiles.Change, str]]]:
            if not first:
                await trio.sleep(1.0)  # the watches of the new set are not in place yet
            async with contextlib.aclosing(real_awatch(*paths, **options)) as inner:
                async for changes in inner:
                    yield changes

        return events()

    monkeypatch.setattr(watchfiles, "awatch", late_awatch)
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("def first_function():\n    pass\n")
    server = ContextServer(root, ScanRules(), tmp_path / "db.sqlite3")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.keep_index)
        await _until(lambda: server.state.watching)
        (root / "pkg").mkdir()
        (root / "pkg" / "d.py").write_text("def nested_function():\n    pass\n")
        await _until(lambda: "pkg" in server.folders)
        (root / "pkg" / "e.py").write_text("def later_function():\n    pass\n")  # in the window
        await _until(lambda: _where(server, "later_function") == ["pkg/e.py"], limit=10)
        nursery.cancel_scope.cancel()
