"""The three tools over a small indexed tree: answers, limits, refusals."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assern.context.index import Indexer, plan
from assern.context.scan import ScanRules, SecretFilter, scan
from assern.context.store import Store
from assern.context.terms import Terms
from assern.context.tools import (
    FILE_LINES,
    TOOLS,
    Engine,
    IndexState,
    ToolError,
    sibling_tests,
)

SECRET_VALUE = "sk-live-0123456789abcdef"

TREE = {
    "src/retry.py": '''
"""Retry policy."""


class RetryPolicy:
    """Decides how long to wait between attempts."""

    def decide_backoff(self, attempt: int) -> float:
        return min(2.0 ** attempt, 60.0)


def retry_call(func):
    return RetryPolicy().decide_backoff(1)
''',
    "src/login.py": """
from src.retry import RetryPolicy


def login(user, password):
    policy = RetryPolicy()
    return check_database(user, password, policy.decide_backoff(0))


def check_database(user, password, wait):
    return True
""",
    "tests/test_retry.py": """
from src.retry import RetryPolicy


def test_decide_backoff_grows():
    assert RetryPolicy().decide_backoff(2) == 4.0
""",
    "docs/retry.md": "# Retry\n\nThe retry policy doubles the wait.\n",
    ".env": f"API_KEY={SECRET_VALUE}\n",
    "config/deploy.pem": f"-----BEGIN PRIVATE KEY-----\n{SECRET_VALUE}\n",
    "long.txt": "\n".join(f"line {i}" for i in range(1, FILE_LINES + 501)) + "\n",
}


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    root = tmp_path / "root"
    for name, text in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    (tmp_path / "outside.txt").write_text("outside the root\n")
    os.symlink(tmp_path / "outside.txt", root / "escape.txt")
    os.symlink(root / ".env", root / "innocent.txt")
    os.symlink(root / "src" / "retry.py", root / "alias.py")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[remote]\nurl = https://token@example.com\n")
    store = Store(tmp_path / "db.sqlite3")
    found = scan(root, ScanRules())
    Indexer(root, store, Terms(), max_file_size=1_000_000).run_batch(plan(found.files, {}).changed, {})
    try:
        yield Engine(root, store, Terms(), SecretFilter(), IndexState(ready=True))
    finally:
        store.close()  # an unclosed database is a ResourceWarning (an error here) from Python 3.13


def _call(engine: Engine, tool: str, **arguments: Any) -> tuple[str, dict[str, Any] | None]:
    answer = engine.call(tool, arguments)
    return "\n".join(answer.texts), answer.structured


def test_semantic_search_answers_with_the_declared_shape(engine: Engine) -> None:
    text, structured = _call(engine, "semantic_search", query="where is the retry backoff decided?")
    assert structured is not None
    results = structured["results"]
    assert results[0]["path"] == "src/retry.py"
    assert results[0]["symbol"] == "RetryPolicy.decide_backoff"
    assert (results[0]["start_line"], results[0]["end_line"]) == (7, 8)
    assert "def decide_backoff" in results[0]["text"]
    assert structured["index"] == {"files": 5, "pending": 0}
    # one result per file, tests and docs after the code
    paths = [r["path"] for r in results]
    assert len(paths) == len(set(paths))
    assert paths.index("tests/test_retry.py") > paths.index("src/login.py")
    assert text.startswith("1. src/retry.py:7-8  RetryPolicy.decide_backoff")


def test_semantic_search_respects_top_k_and_path(engine: Engine) -> None:
    _, structured = _call(engine, "semantic_search", query="retry policy", top_k=1)
    assert structured is not None
    assert len(structured["results"]) == 1
    _, structured = _call(engine, "semantic_search", query="retry policy", path="tests/*")
    assert structured is not None
    assert [r["path"] for r in structured["results"]] == ["tests/test_retry.py"]


def test_a_pending_index_is_reported(engine: Engine) -> None:
    engine.state.pending = 7
    text, structured = _call(engine, "semantic_search", query="login")
    assert structured is not None
    assert structured["index"]["pending"] == 7
    assert "7 still pending" in text


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("semantic_search", {"query": ""}, "query"),
        ("semantic_search", {"query": "   "}, "the query is blank"),
        ("semantic_search", {}, '"query" is a required property'),
        ("semantic_search", {"query": "x", "top_k": 0}, "top_k: 0 is less than the minimum of 1"),
        ("semantic_search", {"query": "x", "top_k": 500}, "top_k: 500 is greater than the maximum of 50"),
        ("semantic_search", {"query": "x", "top_k": "5"}, "top_k"),
        ("semantic_search", {"query": "x", "limit": 5}, "'limit' was unexpected"),
        ("get_file", {"path": "a", "start_line": 0}, "start_line"),
        ("get_context_for_prompt", {"query": "x", "max_files": 0}, "max_files"),
        ("get_context_for_prompt", {"query": "x", "max_tokens": 10}, "max_tokens"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(
    engine: Engine, tool: str, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match="invalid arguments") as caught:
        engine.call(tool, arguments)
    assert message in str(caught.value)


def test_an_unknown_tool_is_refused(engine: Engine) -> None:
    with pytest.raises(ToolError, match="unknown tool 'grep'"):
        engine.call("grep", {})


def test_get_file_reads_a_file_or_some_of_its_lines(engine: Engine) -> None:
    text, structured = _call(engine, "get_file", path="src/retry.py")
    assert structured is None
    assert text == TREE["src/retry.py"].lstrip("\n").rstrip("\n")
    text, _ = _call(engine, "get_file", path="./src/../src/retry.py", start_line=4, end_line=5)
    assert text == 'class RetryPolicy:\n    """Decides how long to wait between attempts."""'
    # a link inside the root is read
    assert _call(engine, "get_file", path="alias.py")[0].startswith('"""Retry policy."""')


def test_a_long_file_is_cut_with_a_note(engine: Engine) -> None:
    answer = engine.call("get_file", {"path": "long.txt"})
    assert len(answer.texts[0].splitlines()) == FILE_LINES
    assert answer.texts[1] == (
        f"[long.txt: lines 1-{FILE_LINES} of {FILE_LINES + 500} shown; ask get_file with "
        f"start_line={FILE_LINES + 1} for the rest]"
    )
    rest = engine.call("get_file", {"path": "long.txt", "start_line": FILE_LINES + 1})
    assert rest.texts == ("\n".join(f"line {i}" for i in range(FILE_LINES + 1, FILE_LINES + 501)),)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside.txt", "leads outside the project's root"),
        ("src/../../outside.txt", "leads outside the project's root"),
        ("/etc/passwd", "is outside the project's root"),
        ("escape.txt", "symbolic link to a file outside"),
        (".env", "is a secret file"),
        ("config/deploy.pem", "is a secret file"),
        ("innocent.txt", "leads to a secret file"),
        (".git/config", "is a secret file"),
        ("src", "is a folder"),
        ("src/nothing.py", "no such file"),
        ("a\0b", "NUL"),
    ],
)
def test_get_file_refuses_what_it_must_not_return(engine: Engine, path: str, reason: str) -> None:
    with pytest.raises(ToolError) as caught:
        engine.call("get_file", {"path": path})
    assert reason in str(caught.value)
    assert SECRET_VALUE not in str(caught.value)


def test_an_absolute_path_inside_the_root_is_read(engine: Engine) -> None:
    text, _ = _call(engine, "get_file", path=str(engine.root / "src" / "login.py"))
    assert "def login" in text


def test_get_file_line_bounds(engine: Engine) -> None:
    with pytest.raises(ToolError, match="past the end"):
        engine.call("get_file", {"path": "src/retry.py", "start_line": 500})
    with pytest.raises(ToolError, match="end_line 2 is before start_line 3"):
        engine.call("get_file", {"path": "src/retry.py", "start_line": 3, "end_line": 2})


def test_the_bundle_groups_snippets_by_file_within_both_limits(engine: Engine) -> None:
    text, bundle = _call(engine, "get_context_for_prompt", query="how does login wait for the retry backoff?")
    assert bundle is not None
    paths = [file["path"] for file in bundle["files"]]
    assert len(paths) == len(set(paths))
    assert paths[0] in ("src/login.py", "src/retry.py")
    assert "src/login.py" in paths
    snippets = [s for file in bundle["files"] for s in file["snippets"]]
    assert all(s["lines"].count("-") == 1 for s in snippets)
    assert bundle["tokens"] <= 4000
    assert "src/login.py" in bundle["summary"]
    assert text.startswith(bundle["summary"])

    _, small = _call(
        engine, "get_context_for_prompt", query="retry backoff login", max_files=1, max_tokens=100
    )
    assert small is not None
    assert len(small["files"]) == 1
    assert 0 < small["tokens"] <= 100
    # the whole answer counts, not only the snippets (tests/context/test_bundle.py)
    assert small["tokens"] > sum(len(s["text"]) for f in small["files"] for s in f["snippets"]) / 4


def test_the_bundle_hints_at_tests_and_callers(engine: Engine) -> None:
    _, bundle = _call(engine, "get_context_for_prompt", query="RetryPolicy.decide_backoff", max_files=1)
    assert bundle is not None
    assert [f["path"] for f in bundle["files"]] == ["src/retry.py"]
    assert "defines RetryPolicy.decide_backoff" in bundle["summary"]
    hints = bundle["hints"]
    assert "tests of src/retry.py: tests/test_retry.py" in hints
    assert any(h.startswith("uses of RetryPolicy.decide_backoff: ") and "src/login.py" in h for h in hints)
    engine.state.pending = 3
    _, bundle = _call(engine, "get_context_for_prompt", query="RetryPolicy")
    assert bundle is not None
    assert bundle["hints"][-1].startswith("the index is still being built: 3 files pending")


def test_no_answer_holds_a_secret(engine: Engine) -> None:
    for query in ("API_KEY", SECRET_VALUE, "private key", "env api key"):
        for tool in ("semantic_search", "get_context_for_prompt"):
            text, structured = _call(engine, tool, query=query)
            # the question itself is echoed in the bundle's summary: nothing else may hold it
            assert SECRET_VALUE not in text.replace(repr(query), "")
            assert structured is not None
            assert SECRET_VALUE not in repr(structured.get("results") or structured.get("files"))


def test_sibling_tests_a_file() -> None:
    assert "pkg/retry_test.go" in sibling_tests("pkg/retry.go")
    assert "tests/test_retry.py" in sibling_tests("src/retry.py")


def test_every_tool_is_read_only_and_structured_tools_declare_their_output() -> None:
    assert set(TOOLS) == {"semantic_search", "get_file", "get_context_for_prompt"}
    assert "outputSchema" in TOOLS["semantic_search"]
    assert "outputSchema" in TOOLS["get_context_for_prompt"]
    for tool in TOOLS.values():
        assert tool["inputSchema"]["additionalProperties"] is False


def test_pending_is_never_zero_before_the_index_is_known_current(engine: Engine) -> None:
    engine.state.ready = False
    assert engine.index_info()["pending"] == 1
    engine.state.pending = 12
    assert engine.index_info()["pending"] == 12
    engine.state.ready = True
    engine.state.pending = 0
    assert engine.index_info()["pending"] == 0
