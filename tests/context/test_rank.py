"""Each step of the ranking pipeline on its own."""

from __future__ import annotations

import pytest

from assern.context.bm25 import Stats, idf, score
from assern.context.rank import (
    DEMOTED,
    FILE_NAME,
    QUALIFIED,
    SYMBOL,
    file_role,
    names,
    parse_query,
    path_signal,
    per_file,
    rerank,
    role_signal,
    symbol_signal,
)
from assern.context.store import Hit
from assern.context.terms import Terms, compounds


def _hit(
    path: str, *, symbol: str | None = None, kind: str = "function", score: float = 1.0, line: int = 1
) -> Hit:
    return Hit(
        chunk_id=line,
        path=path,
        start_line=line,
        end_line=line + 1,
        kind=kind,
        symbol=symbol,
        text="x",
        score=score,
    )


def test_terms_split_identifiers_and_keep_them_whole() -> None:
    terms = Terms().terms("def getUserName(): return user_name")
    assert "user" in terms
    assert "name" in terms
    assert terms.count("username") == 1
    assert "getusername" in terms
    # function words are dropped, names of code are not
    assert Terms().terms("where is the server") == ["server"]
    assert compounds("a.b_c::DeepName") == ["bc", "deepname"]


def test_parse_query_keys_and_wants() -> None:
    query = parse_query("where is the retry policy decided in Retry.decide tests?", Terms())
    assert {"retri", "polici", "retripolici", "decid", "retripolicidecid"} <= query.keys
    assert ("retri", "decid") in query.qualified
    assert query.wants == {"test"}
    assert "where" not in query.keys
    assert query.stems == {"retri", "polici", "decid", "test"}


def test_a_name_is_named_by_its_words_in_any_order_or_form() -> None:
    query = parse_query("where is the backoff decided?", Terms())
    assert names("decide_backoff", query)
    assert names("BackoffDecider", parse_query("the backoff decider", Terms()))
    assert not names("decide_retry", query)
    assert not names("is_the", query)  # stop words name nothing


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("tests/test_x.py", "test"),
        ("pkg/x_test.go", "test"),
        ("web/src/app.spec.ts", "test"),
        ("src/FooTest.java", "test"),
        ("docs/guide.md", "docs"),
        ("README.md", "docs"),
        ("vendor/lib/a.go", "vendor"),
        ("api/types_pb2.py", "generated"),
        ("static/app.min.js", "generated"),
        ("src/retry.py", None),
        ("src/testing_utils_helper.py", None),
    ],
)
def test_file_roles(path: str, role: str | None) -> None:
    assert file_role(path) == role


def test_a_definition_named_in_the_question_is_raised() -> None:
    query = parse_query("how does decide work", Terms())
    assert symbol_signal(_hit("a.py", symbol="Retry.decide"), query) == (SYMBOL, "Retry.decide")
    assert symbol_signal(_hit("a.py", symbol="Retry.other"), query) == (1.0, None)
    # loose code in a class is no definition of that name
    assert symbol_signal(_hit("a.py", symbol="decide", kind="code"), query) == (1.0, None)
    qualified = parse_query("Retry.decide", Terms())
    assert symbol_signal(_hit("a.py", symbol="Retry.decide"), qualified) == (
        SYMBOL * QUALIFIED,
        "Retry.decide",
    )
    # a run of words names a camelCase definition
    assert (
        symbol_signal(_hit("a.py", symbol="RetryPolicy"), parse_query("the retry policy", Terms()))[0]
        == SYMBOL
    )


def test_path_and_role_signals() -> None:
    query = parse_query("how does retry work", Terms())
    assert path_signal("src/retry.py", query) == FILE_NAME
    assert path_signal("retry/core.py", query) > 1.0
    assert path_signal("src/other.py", query) == 1.0
    assert role_signal("tests/test_retry.py", query) == DEMOTED["test"]
    assert role_signal("tests/test_retry.py", parse_query("tests of retry", Terms())) == 1.0


def test_rerank_puts_the_named_definition_first_and_demotes_tests() -> None:
    query = parse_query("where is decide", Terms())
    hits = [
        _hit("tests/test_engine.py", symbol="test_decide_many", score=5.0),
        _hit("src/engine.py", symbol="Engine.decide", score=2.0),
        _hit("src/notes.py", symbol=None, kind="code", score=3.0),
    ]
    order = [s.hit.path for s in rerank(hits, query)]
    assert order == ["src/engine.py", "src/notes.py", "tests/test_engine.py"]
    # each signal can be switched off on its own; with none the order is BM25F's
    assert next(s.hit.path for s in rerank(hits, query, signals=("path", "role"))) == "src/notes.py"
    assert [s.hit.path for s in rerank(hits, query, signals=())] == [
        "tests/test_engine.py",
        "src/notes.py",
        "src/engine.py",
    ]


def test_per_file_keeps_the_best_chunks_of_each_file() -> None:
    query = parse_query("x", Terms())
    scored = rerank([_hit("a", score=3, line=1), _hit("a", score=2, line=5), _hit("b", score=1)], query)
    assert [(s.hit.path, s.hit.start_line) for s in per_file(scored)] == [("a", 1), ("b", 1)]
    assert len(per_file(scored, limit=2)) == 3


def test_bm25f_weighs_fields_lengths_and_rarity() -> None:
    stats = Stats(chunks=100, average=(10.0, 10.0, 100.0))
    weights = {"retri": idf(5, 100), "the": idf(90, 100)}
    assert idf(5, 100) > idf(90, 100) > 0
    in_symbol = score(("retri", "", ""), weights, stats)
    in_body = score(("", "", "retri"), weights, stats)
    assert in_symbol > in_body > 0
    # the same count in a longer body counts less
    assert score(("", "", "retri " + "x " * 200), weights, stats) < in_body
    # more occurrences count more, with diminishing returns
    twice = score(("", "", "retri retri"), weights, stats)
    thrice = score(("", "", "retri retri retri"), weights, stats)
    assert in_body < twice < thrice
    assert thrice - twice < twice - in_body
    assert score(("", "", "other"), weights, stats) == 0.0
