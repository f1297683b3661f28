"""`python -I -m assern.context`: a bad command line is refused before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assern.context.rank import SIGNALS
from assern.context.server import DISABLE_ENV, RANKING_ENV, ranking_signals


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-I", "-m", "assern.context", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--root", "does-not-exist"), "--root 'does-not-exist' is not a folder"),
        (("--root", ".", "--max-file-size", "0"), "--max-file-size must be at least 1"),
        ((), "the following arguments are required: --root"),
    ],
)
def test_a_bad_command_line_is_refused(args: tuple[str, ...], message: str) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""  # stdout is the MCP wire: nothing but MCP goes there


def test_a_file_is_no_root(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    done = _run("--root", str(tmp_path / "file"))
    assert done.returncode == 2
    assert "is not a folder" in done.stderr


def test_the_ranking_the_benchmark_asks_for() -> None:
    assert ranking_signals({}) == SIGNALS
    assert ranking_signals({RANKING_ENV: "reranked"}) == SIGNALS
    assert ranking_signals({RANKING_ENV: "lexical"}) == ()
    assert ranking_signals({DISABLE_ENV: "role"}) == ("symbol", "path")
    with pytest.raises(ValueError, match="not available in the context server yet"):
        ranking_signals({RANKING_ENV: "fused"})
    with pytest.raises(ValueError, match="expected 'lexical' or 'reranked'"):
        ranking_signals({RANKING_ENV: "best"})
    with pytest.raises(ValueError, match="expected one of symbol, path, role"):
        ranking_signals({DISABLE_ENV: "colour"})


def test_fused_ranking_is_refused_clearly(tmp_path: Path) -> None:
    command = [sys.executable, "-I", "-m", "assern.context", "--root", str(tmp_path)]
    env = {**os.environ, RANKING_ENV: "fused"}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env
    )
    assert done.returncode == 2
    assert "ASSERN_CONTEXT_RANKING=fused" in done.stderr
