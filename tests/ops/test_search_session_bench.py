"""The benchmark of steps searched in order (ops/bench/search/session.py): without the
server called last it scores the steps as the search does; with it, what the product's
`session.lifted` answers, and it runs on both parts."""

from __future__ import annotations

from typing import Any

import pytest
from ops_scripts import OPS, load_script

bench: Any = load_script(OPS / "bench" / "search" / "session.py", "search_session_bench")


def test_without_the_server_called_last_the_steps_score_as_the_search_does() -> None:
    _catalog, index, asked = bench.run.fixture_catalog()
    groups = bench.tasks(asked, "tuning")
    steps = [query for group in groups for query in group]
    alone = bench.searched(index, groups, 0.0, carry=False)
    words = bench.run.recall(lambda q: [h.doc.name for h in index.find(q, limit=10).hits], steps)
    assert len(alone) == len(steps) > 100
    assert abs(bench.mean(alone) - words["recall@5"]) < 0.001
    # one connection through every task in another order: the same steps, the same score
    assert sorted(bench.searched(index, bench.shuffled(groups, 1), 0.0, carry=True)) == sorted(alone)


def test_after_a_call_the_answer_is_the_product_s_lifted_one() -> None:
    _catalog, index, _asked = bench.run.fixture_catalog()
    query = "merge the pull request"
    assert bench.answer(index, query, None, 1.0) == [h.doc.name for h in index.find(query, limit=10).hits]
    assert bench.answer(index, query, None, 1.0)[0] == "github_merge_pull_request"
    assert bench.answer(index, query, "gitea", 1.0)[0] == "gitea_merge_pr"
    assert bench.session.SESSION_BONUS == 1.0  # the bonus tried is put back


@pytest.mark.parametrize("argv", [["--bonus", "0.5"], ["--heldout"]])
def test_both_parts_print_their_figures(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "bonus 0.5" in out if "--bonus" in argv else "one connection, order 5" in out


def test_the_previous_step_s_words_carried_at_no_weight_change_nothing() -> None:
    _catalog, index, asked = bench.run.fixture_catalog()
    groups = bench.tasks(asked, "tuning")[:40]
    assert bench.searched(index, groups, 1.0, carry=False, words=0.0) == bench.searched(
        index, groups, 1.0, carry=False
    )
    query, before = "merge it", "open a pull request for the branch"
    alone = bench.answer(index, query, None, 0.0)
    carried = bench.answer(index, query, None, 0.0, before, 0.5)
    # the previous search's words move the pull request tools up, the cells' merge down
    assert carried.index("github_merge_pull_request") < alone.index("github_merge_pull_request")
    assert carried.index("excel_merge_cells") > alone.index("excel_merge_cells")


def test_the_words_candidate_prints_its_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--bonus", "1.0", "--words", "0.3"]) == 0
    assert "words 0.3" in capsys.readouterr().out
