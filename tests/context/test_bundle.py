"""`get_context_for_prompt` keeps its whole answer within `max_tokens`, in both forms.

The answers are measured here as a client gets them, independently of bundle.py: the
text content, and the `structuredContent` as compact JSON, in UTF-8 bytes at the
project's 4 bytes a token. The tree is written to disk and indexed for real: modules
with long lines full of quotes, backslashes, tabs and non-ASCII text, their tests and
their users (for the hints), and prose under long paths, so the summary, the hints,
the headers and the JSON's escapes all weigh: leave any of them out of the count and
some answer goes over.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
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

BUDGETS = (100, 200, 1000, 4000)


def _rules(name: str, count: int, lines: int) -> str:
    """Python functions whose bodies are long lines of quotes, backslashes, tabs and
    non-ASCII text."""
    said = '\\"quoted\\"\t' * 6
    rows = []
    for number in range(count):
        body = "".join(
            f'\tnote_{line} = "{said}C:\\\\{name}\\\\{number}\\\\{line} «{name}»"\n' for line in range(lines)
        )
        rows.append(
            f'def {name}_rule_{number}(table):\n\t"""Reads the \'{name}\' table, «row» {number}."""\n'
            f'{body}\treturn table.get("{name}_{number}", note_0)\n'
        )
    return "\n\n".join(rows)


def _policy() -> str:
    """A class whose methods decide a budget's limit, with long docstrings."""
    methods = []
    for number in range(12):
        doc = "".join(
            f"\t\tThe budget policy decides the limit of part {number}, line {line}: \"hard\" or 'soft', "
            f"in tokens\tand bytes.\n"
            for line in range(14)
        )
        suffix = f"_{number}" if number else ""
        methods.append(
            f'\tdef decide_limit{suffix}(self, tokens):\n\t\t"""Decides the limit.\n\n{doc}\t\t"""\n'
            f"\t\treturn min(tokens, self.limit * {number + 1})\n"
        )
    return 'class BudgetPolicy:\n\t"""The budget policy."""\n\n' + "\n".join(methods)


TREE = {
    "src/budget/policy.py": _policy(),
    "src/budget/render.py": "from .policy import BudgetPolicy\n\n\ndef render(tokens):\n"
    "\treturn BudgetPolicy().decide_limit(tokens)\n",
    "tests/test_policy.py": "from budget.policy import BudgetPolicy\n\n\ndef test_decide_limit():\n"
    "\tassert BudgetPolicy().decide_limit(5) == 5\n",
    "src/budget/quoting.py": _rules("quoting", 12, 20),
    "src/budget/escapes.py": _rules("escapes", 12, 20),
    "src/budget/uses_quoting.py": "def read_all(table):\n"
    + "".join(f"\tquoting_rule_{n}(table)\n" for n in range(12)),
    "tests/test_quoting.py": "def test_quoting(table):\n"
    + "".join(f"\tquoting_rule_{n}(table)\n" for n in range(12)),
    # plain prose under long paths, in short sections: there the text's headers weigh most
    **{
        f"docs/guides-of-the-context-server/notes-on-the-marmalade-budget-part-{part}.md": "".join(
            f"# Marmalade {n}\n\nThe marmalade budget of part {part}.\n\n" for n in range(5)
        )
        for part in range(12)
    },
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    root = tmp_path_factory.mktemp("tree") / "root"
    for name, text in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    store = Store(root.parent / "db.sqlite3")
    found = scan(root, ScanRules())
    Indexer(root, store, Terms(), max_file_size=1_000_000).run_batch(plan(found.files, {}).changed, {})
    try:
        yield Engine(root, store, Terms(), SecretFilter(), IndexState(ready=True))
    finally:
        store.close()  # an unclosed database is a ResourceWarning (an error here) from Python 3.13


def _forms(engine: Engine, **arguments: Any) -> tuple[int, int, dict[str, Any]]:
    """The answer's text content and compact JSON, in bytes, and its bundle."""
    answer = engine.call("get_context_for_prompt", arguments)
    assert answer.structured is not None
    text = len("\n".join(answer.texts).encode())
    data = len(json.dumps(answer.structured, ensure_ascii=False, separators=(",", ":")).encode())
    return text, data, answer.structured


QUERIES = (
    "how does the budget policy decide the limit in tokens",
    "BudgetPolicy.decide_limit",
    "quoting_rule_3 escapes table path",
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
            if max_tokens == 4000:
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
    cut = Cut(Scored(hit=hit, score=1.0))
    for count in reversed(range(len(lines) + 1)):
        joined = "\n".join(lines[:count])
        text, data = cut.sizes(count)
        assert text == len(joined.encode("utf-8", "surrogatepass"))
        assert data == len(compact_json(joined).encode("utf-8", "surrogatepass")) - 2
        if count:
            assert cut.first(count).hit.text == joined
            assert cut.first(count).hit.end_line == 4 + count


def test_the_quick_rejection_changes_no_answer(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    for query in QUERIES:
        for max_tokens in BUDGETS:
            arguments = {"query": query, "max_tokens": max_tokens, "max_files": 10}
            quick = engine.call("get_context_for_prompt", arguments)
            monkeypatch.setattr(bundle, "QUICK", False)
            measured = engine.call("get_context_for_prompt", arguments)
            monkeypatch.setattr(bundle, "QUICK", True)
            assert quick == measured, (query, max_tokens)


@given(st.lists(st.text(max_size=30), min_size=1, max_size=8), st.integers(min_value=0, max_value=200))
def test_the_least_lines_worth_keeping_are_the_fewest_that_reach_the_size(
    lines: list[str], size: int
) -> None:
    lines = [line.replace("\n", " ") for line in lines]
    hit = Hit(chunk_id=1, path="a.py", start_line=1, end_line=len(lines), kind="code",
              symbol=None, text="\n".join(lines), score=1.0)  # fmt: skip
    cut = Cut(Scored(hit=hit, score=1.0))
    reached = [count for count in range(len(lines) + 1) if cut.sizes(count)[0] >= size]
    assert cut.least(size) == (reached[0] if reached else len(lines))


def _line(server: subprocess.Popen[bytes], message: dict[str, Any]) -> bytes:
    """Send one JSON-RPC message; the raw line of its answer (a request's), as written."""
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write(json.dumps(message).encode() + b"\n")
    server.stdin.flush()
    if "id" not in message:
        return b""
    while True:
        raw = server.stdout.readline()
        assert raw, "the server closed its stdout"
        if json.loads(raw).get("id") == message["id"]:
            return raw


def test_the_answer_on_the_wire_fits_in_either_form(tmp_path: Path) -> None:
    """Through the real process: the text content and the `structuredContent` exactly as
    the server wrote them on stdout."""
    root = tmp_path / "root"
    for name, text in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    command = [sys.executable, "-I", "-m", "assern.context", "--root", str(root), "--no-watch"]
    command += ["--db", str(tmp_path / "db.sqlite3")]
    with (
        (tmp_path / "stderr").open("wb") as errors,
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors) as server,
    ):
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        _line(server, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        _line(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        ask = {"name": "semantic_search", "arguments": {"query": "budget"}}
        for number in itertools.count(1):  # until the first index is complete
            raw = _line(server, {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": ask})
            if json.loads(raw)["result"]["structuredContent"]["index"]["pending"] == 0:
                break
            assert number < 400, "the index never completed"
            time.sleep(0.05)
        for max_tokens in (200, 1000, 4000):
            arguments = {"query": QUERIES[0], "max_tokens": max_tokens, "max_files": 10}
            call = {"name": "get_context_for_prompt", "arguments": arguments}
            raw = _line(
                server, {"jsonrpc": "2.0", "id": f"b{max_tokens}", "method": "tools/call", "params": call}
            )
            text = raw.decode()
            start = text.index('"structuredContent":') + len('"structuredContent":')
            structured, end = json.JSONDecoder().raw_decode(text, start)
            data = len(text[start:end].encode())
            texts = [block["text"] for block in json.loads(raw)["result"]["content"]]
            shown = len("\n".join(texts).encode())
            assert max(shown, data) <= max_tokens * 4, max_tokens
            assert structured["tokens"] == math.ceil(max(shown, data) / 4), max_tokens
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
