"""`python -I -m assern.context`: a bad command line is refused before anything starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from assern.context.fusion import Fusion
from assern.context.rank import SIGNALS
from assern.context.server import DISABLE_ENV, FUSION_ENV, RANKING_ENV, Ranking, choose_ranking


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


def test_fused_is_the_default_with_the_semantic_extra_and_reranked_without() -> None:
    fused = choose_ranking({}, semantic=True)
    assert fused == Ranking(mode="fused", signals=SIGNALS, meaning=True, fusion=Fusion())
    assert choose_ranking({}, semantic=False) == Ranking(mode="reranked", signals=SIGNALS)


def test_the_rankings_the_benchmark_asks_for() -> None:
    assert choose_ranking({RANKING_ENV: "reranked"}, semantic=True).signals == SIGNALS
    assert choose_ranking({RANKING_ENV: "lexical"}, semantic=True) == Ranking(mode="lexical", signals=())
    alone = choose_ranking({RANKING_ENV: "meaning"}, semantic=True)
    assert (alone.signals, alone.meaning, alone.fusion) == ((), True, None)
    bare = choose_ranking({RANKING_ENV: "fused-norerank"}, semantic=True)
    assert (bare.signals, bare.meaning, bare.fusion) == ((), True, Fusion())
    assert choose_ranking({DISABLE_ENV: "role"}, semantic=False).signals == ("symbol", "path")
    assert choose_ranking({DISABLE_ENV: "symbol"}, semantic=True).signals == ("path", "role")
    blended = choose_ranking({FUSION_ENV: "blend:0.8"}, semantic=True)
    assert blended.fusion == Fusion(method="blend", weight=0.8)


@pytest.mark.parametrize(
    ("environ", "semantic", "message"),
    [
        ({RANKING_ENV: "fused"}, False, "needs the semantic extra (pip install 'assern[semantic]'"),
        ({RANKING_ENV: "meaning"}, False, "ASSERN_CONTEXT_RANKING=meaning: ranking by meaning needs"),
        ({RANKING_ENV: "best"}, True, "expected one of fused, reranked, lexical, meaning, fused-norerank"),
        ({DISABLE_ENV: "colour"}, True, "expected one of symbol, path, role"),
        ({FUSION_ENV: "vote"}, True, "ASSERN_CONTEXT_FUSION='vote': expected rrf or blend"),
        ({FUSION_ENV: "rrf:much"}, True, "the weight 'much' is not a number"),
    ],
)
def test_a_ranking_that_cannot_be_had_is_refused_saying_why(
    environ: dict[str, str], semantic: bool, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        choose_ranking(environ, semantic=semantic)


def test_an_unknown_ranking_stops_the_process_clearly(tmp_path: Path) -> None:
    command = [sys.executable, "-I", "-m", "assern.context", "--root", str(tmp_path)]
    env = {**os.environ, RANKING_ENV: "best"}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env
    )
    assert done.returncode == 2
    assert "ASSERN_CONTEXT_RANKING='best'" in done.stderr
