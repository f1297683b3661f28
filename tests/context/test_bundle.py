"""`get_context_for_prompt` keeps its whole answer within `max_tokens`, in both forms.

The answers are measured here as a client gets them, independently of bundle.py: the
text content, and the `structuredContent` as compact JSON, in UTF-8 bytes at the
project's 4 bytes a token. The tree is real code (this package's own sources and
tests, copied) with a file of long lines full of quotes, backslashes and tabs, so the
summary, the hints, the headers and the JSON's escapes all weigh: leave any of them
out of the count and some answer goes over.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assern.actors.router import views
from assern.context import bundle
from assern.context.bundle import Cut, compact_json
from assern.context.index import Indexer, plan
from assern.context.rank import Scored
from assern.context.scan import ScanRules, SecretFilter, scan
from assern.context.store import Hit, Store
from assern.context.terms import Terms
from assern.context.tools import Engine, IndexState

REPO = Path(__file__).resolve().parents[2]
BUDGETS = (100, 200, 1000, 4000)


def _quoted_module(name: str) -> str:
    """Python with long lines of quotes, backslashes, tabs and non-ASCII text."""
    rows = []
    for number in range(40):
        said = '\\"quoted\\"\t' * 12
        rows.append(
            f'def {name}_rule_{number}(table):\n\t"""Reads the \'{name}\' table, «row» {number}."""\n'
            f'\treturn table.get("{name}_{number}", "{said}C:\\\\path\\\\{number}")\n'
        )
    return "\n\n".join(rows)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("tree") / "root"
    shutil.copytree(REPO / "context", root / "context", ignore=shutil.ignore_patterns("__pycache__"))
    # this file aside: it holds the words of the question that must find nothing
    skipped = shutil.ignore_patterns("__pycache__", Path(__file__).name)
    shutil.copytree(REPO / "tests" / "context", root / "tests", ignore=skipped)
    (root / "context" / "quoting.py").write_text(_quoted_module("quoting"))
    (root / "context" / "escapes.py").write_text(_quoted_module("escapes"))
    # the users and the tests of the quoting rules, for the hints
    calls = "".join(f"    quoting_rule_{n}(table)\n" for n in range(40))
    (root / "context" / "uses_quoting.py").write_text(f"def read_all(table):\n{calls}")
    (root / "tests" / "test_quoting.py").write_text(f"def test_quoting(table):\n{calls}")
    # plain prose under long paths, in short sections: there the text's headers weigh most
    notes = root / "docs" / "guides-of-the-context-server"
    notes.mkdir(parents=True)
    for part in range(12):
        sections = "".join(f"# Marmalade {n}\n\nThe marmalade budget of part {part}.\n\n" for n in range(5))
        (notes / f"notes-on-the-marmalade-budget-of-each-section-part-{part}.md").write_text(sections)
    store = Store(root.parent / "db.sqlite3")
    found = scan(root, ScanRules())
    Indexer(root, store, Terms(), max_file_size=1_000_000).run_batch(plan(found.files, {}).changed, {})
    return Engine(root, store, Terms(), SecretFilter(), IndexState(ready=True))


def _forms(engine: Engine, **arguments: Any) -> tuple[int, int, dict[str, Any]]:
    """The answer's text content and compact JSON, in bytes, and its bundle."""
    answer = engine.call("get_context_for_prompt", arguments)
    assert answer.structured is not None
    text = len("\n".join(answer.texts).encode())
    data = len(json.dumps(answer.structured, ensure_ascii=False, separators=(",", ":")).encode())
    return text, data, answer.structured


QUERIES = (
    "how does the bundle keep the token budget of get_context_for_prompt",
    "Engine.get_context_for_prompt BundleHints",
    "quoting_rule_3 escapes table path",
    "where are the files of the index scanned and secrets filtered",
    "the marmalade budget notes",
)


@pytest.mark.parametrize("max_tokens", BUDGETS)
@pytest.mark.parametrize("query", QUERIES)
def test_the_whole_answer_fits_its_budget_in_either_form(engine: Engine, query: str, max_tokens: int) -> None:
    text, data, found = _forms(engine, query=query, max_tokens=max_tokens, max_files=10)
    assert found["files"], "the tree answers every question"
    assert max(text, data) <= max_tokens * 4
    # `tokens` is what was sent: the larger form, at 4 bytes a token
    assert found["tokens"] == math.ceil(max(text, data) / 4)
    # the budget is filled (but for less than a cut snippet and its file's frame), or the
    # files are all there: a count that forgot a part of the answer would have gone over
    assert found["tokens"] >= max_tokens - 2 * bundle.MIN_CUT_TOKENS or len(found["files"]) == 10


def test_the_budgets_are_filled_where_every_part_weighs(engine: Engine) -> None:
    """The cases above are the ones where a part left out of the count shows: the hints,
    the summary's reasons, several snippets per file, and escapes that make the JSON
    the larger form in one answer and the headers make the text larger in another."""
    larger = set()
    for query in QUERIES:
        for max_tokens in BUDGETS:
            text, data, found = _forms(engine, query=query, max_tokens=max_tokens, max_files=10)
            larger.add("text" if text > data else "json")
            if max_tokens >= 1000 and "marmalade" not in query:
                assert found["hints"], query
                assert any(len(file["snippets"]) > 1 for file in found["files"]), query
    assert larger == {"text", "json"}
    _, data, found = _forms(engine, query=QUERIES[2], max_tokens=1000)
    texts = sum(len(s["text"].encode()) for f in found["files"] for s in f["snippets"])
    assert data - texts > 0.2 * data  # the escapes and the frame are a fifth of it and more


def test_a_long_question_and_a_pending_index_still_fit_the_smallest_budget(engine: Engine) -> None:
    question = '«Why» does the "bundle"\tkeep its budget? ' * 90  # under the 4,000 characters allowed
    engine.state.pending = 12
    try:
        text, data, found = _forms(engine, query=question, max_tokens=100)
    finally:
        engine.state.pending = 0
    assert max(text, data) <= 400
    assert found["tokens"] == math.ceil(max(text, data) / 4)
    assert "…" in found["summary"] or "the task" in found["summary"]
    assert found["hints"][-1].startswith("the index is still being built: 12 files pending")


def test_nothing_found_is_an_answer_within_the_budget_too(engine: Engine) -> None:
    text, data, found = _forms(engine, query="zzzqqq xxyyzz", max_tokens=100)
    assert found["files"] == []
    assert found["summary"] == "nothing in the index matches 'zzzqqq xxyyzz'"
    assert found["tokens"] == math.ceil(max(text, data) / 4) <= 100


def test_the_token_rule_is_the_instance_s_own() -> None:
    assert bundle.BYTES_PER_TOKEN == views.BYTES_PER_TOKEN
    assert bundle.tokens_of(9) == views.estimate_tokens(b"x" * 9) == 3


@given(st.lists(st.text(max_size=30), min_size=1, max_size=8))
def test_a_cut_knows_what_each_count_of_lines_adds_to_either_form(lines: list[str]) -> None:
    lines = [line.replace("\n", " ") for line in lines]
    hit = Hit(chunk_id=1, path="a.py", start_line=5, end_line=4 + len(lines), kind="code",
              symbol=None, text="\n".join(lines), score=1.0)  # fmt: skip
    cut = Cut.of(Scored(hit=hit, score=1.0))
    for count in range(len(lines) + 1):
        joined = "\n".join(lines[:count])
        assert cut.text[count] == len(joined.encode("utf-8", "surrogatepass"))
        assert cut.json[count] == len(compact_json(joined).encode("utf-8", "surrogatepass")) - 2
        if count:
            assert cut.first(count).hit.text == joined
            assert cut.first(count).hit.end_line == 4 + count
