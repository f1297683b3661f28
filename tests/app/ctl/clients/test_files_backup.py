"""Replacing a file safely, and its numbered backups."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from assern.app.ctl.clients.backup import backup_name, backups, newest, take_backup
from assern.app.ctl.clients.files import FileRefused, replace, snapshot


def test_replace_keeps_the_permissions(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")
    path.chmod(0o640)
    replace(snapshot(path), b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["a.json"]


def test_a_file_changed_after_it_was_read_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")
    snap = snapshot(path)
    path.write_text("the client wrote this")
    with pytest.raises(FileRefused, match="changed since it was read"):
        replace(snap, b"new")
    assert path.read_text() == "the client wrote this"
    assert sorted(os.listdir(tmp_path)) == ["a.json"]


def test_a_read_only_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")
    path.chmod(0o444)
    with pytest.raises(FileRefused, match="read-only"):
        replace(snapshot(path), b"new")
    assert path.read_text() == "old"


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    replace(snapshot(link), b"new")
    assert link.is_symlink()
    assert real.read_text() == "new"


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileRefused, match="does not exist"):
        snapshot(tmp_path / "none.json")


def test_backups_are_numbered_never_overwritten(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    path = tmp_path / "x" / "settings.json"
    path.parent.mkdir()
    path.write_text("one")
    first, written = take_backup(folder, snapshot(path))
    assert written
    assert first.name == backup_name(path)
    again, written = take_backup(folder, snapshot(path))
    assert (again, written) == (first, False)
    path.write_text("two")
    second, _ = take_backup(folder, snapshot(path))
    path.write_text("three")
    third, _ = take_backup(folder, snapshot(path))
    assert [p.name for p in backups(folder, path)] == [first.name, f"{first.name}.1", f"{first.name}.2"]
    assert (first.read_text(), second.read_text(), third.read_text()) == ("one", "two", "three")
    assert newest(folder, path) == third
    assert stat.S_IMODE(third.stat().st_mode) & 0o077 == 0
