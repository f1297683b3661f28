"""`assernctl context reindex --timeout/--no-wait` and the vectors' lines of the status
(app/ctl/context.py, app/ctl/render.py), without an instance: the control socket's
answer is stood in for, the context process's database is a real one."""

from __future__ import annotations

import argparse
import os
import time
import types
from pathlib import Path
from typing import Any

import pytest

from assern.app.ctl import context as ctl
from assern.app.ctl.common import Usage
from assern.app.ctl.parser import build_parser, ctl_main
from assern.app.ctl.render import context_line
from assern.context.state import write_state
from assern.context.store import Store


def _reindex_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["context", "reindex", *argv])


def test_the_reindex_timeout_is_checked_before_anything_is_asked() -> None:
    assert ctl.reindex_timeout(_reindex_args()) == ctl.REINDEX_TIMEOUT == 600
    assert ctl.reindex_timeout(_reindex_args("--timeout", "2.5")) == 2.5
    assert ctl.reindex_timeout(_reindex_args("--no-wait")) is None
    for bad in ("0", "-3", "nan", "inf"):
        with pytest.raises(Usage, match="--timeout must be a positive number of seconds"):
            ctl.reindex_timeout(_reindex_args("--timeout", bad))
    with pytest.raises(Usage, match="--timeout and --no-wait do not go together"):
        ctl.reindex_timeout(_reindex_args("--timeout", "5", "--no-wait"))


def test_a_bad_timeout_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl_main(["context", "reindex", "--timeout", "0"]) == 2
    assert "--timeout must be a positive number of seconds, not 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's own refusal: not a number
        ctl_main(["context", "reindex", "--timeout", "soon"])
    assert "invalid float value: 'soon'" in capsys.readouterr().err


class Clock:
    """time.monotonic and time.sleep for `follow`: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.sleeps > 10_000:
            raise AssertionError("it waits for ever")


def _running_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **state: Any) -> Clock:
    """A context server's database whose process (this one) has done no reindex yet, an
    instance that answers `context_reindex` for it, and a clock that moves as it waits."""
    db = tmp_path / "code.sqlite3"
    store = Store(db)
    try:
        values = {"pid": os.getpid(), "phase": "current", "reindex_asked": 1, "reindex_done": 0, **state}
        store.run_write(lambda conn: write_state(conn, values))
    finally:
        store.close()
    asked = {"server": "code", "root": str(tmp_path), "pid": os.getpid(), "reindex": 1, "full": False}
    asked["database"] = str(db)

    class FakeInstance:
        def ask(self, command: str, **fields: Any) -> dict[str, Any]:
            return {"servers": [asked]}

    monkeypatch.setattr(ctl, "find_instance", lambda args: (None, FakeInstance()))
    clock = Clock()
    fake = types.SimpleNamespace(
        monotonic=clock.monotonic, sleep=clock.sleep, time=time.time, strftime=time.strftime,
        gmtime=time.gmtime,
    )  # fmt: skip
    monkeypatch.setattr(ctl, "time", fake)
    return clock


def test_a_reindex_past_its_timeout_is_left_running_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = _running_server(tmp_path, monkeypatch)
    assert ctl_main(["context", "reindex", "--timeout", "3"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "assernctl: the reindex is still running after 3 s: code; it goes on in the background "
        "(follow it with `assernctl context status --watch`)\n"
    )
    assert 3 <= clock.now - 1000 < 3 + ctl.POLL * 2  # it waited that long, no more

    clock = _running_server(tmp_path, monkeypatch)
    assert ctl_main(["context", "reindex", "--json", "--timeout", "1"]) == 1
    out, err = capsys.readouterr()
    assert '"done": false' in out
    assert '"timed_out": [\n    "code"\n  ]' in out
    assert "it goes on in the background" in err


def test_a_reindex_done_in_time_is_reported_and_no_wait_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = _running_server(tmp_path, monkeypatch, reindex_done=1, last_index={"seconds": 1.5})
    assert ctl_main(["context", "reindex", "--timeout", "3"]) == 0
    assert capsys.readouterr().out.startswith("code: reindex done in 1.5 s: 0 files indexed")
    assert clock.sleeps == 0

    clock = _running_server(tmp_path, monkeypatch)  # never done: --no-wait returns at once
    assert ctl_main(["context", "reindex", "--no-wait"]) == 0
    assert capsys.readouterr().out.startswith(f"code: reindex of {tmp_path} started (pid {os.getpid()})")
    assert clock.sleeps == 0


def _entry(vectors: Any, *, state: str = "ready") -> dict[str, Any]:
    return {
        "server": "code",
        "state": state,
        "pid": 7,
        "root": "/r",
        "database": "/d",
        "indexed": True,
        "phase": "current",
        "files": 40,
        "chunks": 90,
        "pending": 0,
        "watcher": "watching",
        "skipped": 0,
        "size_bytes": 1024,
        "vectors": vectors,
    }


def test_the_status_says_how_many_chunks_wait_for_their_vectors() -> None:
    embedding = {
        "state": "embedding", "chunks": 60, "pending_chunks": 30, "pending_files": 12, "dimensions": 64
    }  # fmt: skip
    lines = ctl.entry_lines(_entry(embedding), now=1000.0)
    assert (
        "  vectors   60 chunks with a vector, 30 chunks of 12 files waiting "
        "(ranked by words alone until theirs is computed)"
    ) in lines
    assert lines[-1] == "  database  /d, 1.0 KB"
    assert context_line(_entry(embedding), running=True).endswith(
        "watcher watching, vectors embedding, 12 files by words alone; current"
    )

    current = {**embedding, "state": "current", "chunks": 90, "pending_chunks": 0, "pending_files": 0}
    lines = ctl.entry_lines(_entry(current), now=1000.0)
    assert "  vectors   90 chunks with a vector, none waiting (ranked by words and meaning)" in lines
    assert context_line(_entry(current), running=True).endswith("watcher watching, vectors current; current")
    loading = {**embedding, "state": "loading", "chunks": 0}
    lines = ctl.entry_lines(_entry(loading), now=1000.0)
    assert "  vectors   loading the stored vectors: ranked by words alone until they are in" in lines
    stopped = ctl.entry_lines(_entry(current, state="not running"), now=1000.0)
    assert "  vectors   90 chunks with a vector when the server last ran" in stopped

    # without the semantic extra (or with a ranking by words), no vectors line at all
    assert not [line for line in ctl.entry_lines(_entry(None), now=1000.0) if "vectors" in line]
    assert "vectors" not in context_line(_entry(None), running=True)
