"""Learning from use (actors/search/learned.py, learned_actor.py): the boost's arithmetic,
the re-ranking, the bounds, merging, the file and its lock, and the actor's merges."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.search import learned as lrn
from assern.actors.search.index import GOOD_COVERAGE, Found, SearchIndex, SegmentInput
from assern.actors.search.learned_actor import LearnedActor
from assern.supervisor.cell import Cell


def index_of(*tools: tuple[str, str]) -> SearchIndex:
    made = tuple(
        (f"s_{name}", name, types.Tool(name=name, description=text, input_schema={})) for name, text in tools
    )
    return SearchIndex().updated([SegmentInput(server="s", tools=made)])


# --------------------------------------------------------------- the boost


def test_the_boost_grows_with_the_calls_and_stays_under_its_bound() -> None:
    learned = lrn.Learned({("s", "a"): 3, ("s", "b"): 1_000_000})
    assert learned.boost("s", "never") == 0.0
    assert learned.boost("s", "a") == pytest.approx(lrn.MAX_BOOST * 3 / (3 + lrn.HALF))
    assert learned.boost("s", "a") == pytest.approx(lrn.MAX_BOOST / 2)  # HALF calls: half
    assert learned.boost("s", "a") < learned.boost("s", "b") < lrn.MAX_BOOST


def test_reranking_lifts_a_called_tool_by_a_share_of_the_best_score() -> None:
    index = index_of(("first", "read a text file"), ("second", "read a file"), ("third", "list files"))
    found = index.find("read text file", limit=lrn.CANDIDATES)
    assert [hit.doc.tool for hit in found.hits][:2] == ["first", "second"]
    top = found.hits[0].score
    second = found.hits[1].score
    calls = 100  # the boost nearly at its bound
    learned = lrn.Learned({("s", "second"): calls})
    moved = lrn.reranked(found, learned, limit=2)
    assert len(moved.hits) == 2
    expected = second + top * lrn.MAX_BOOST * calls / (calls + lrn.HALF)
    by_tool = {hit.doc.tool: hit.score for hit in moved.hits}
    assert by_tool["second"] == pytest.approx(expected)
    assert by_tool["first"] == pytest.approx(top)
    assert [hit.doc.tool for hit in moved.hits] == (
        ["second", "first"] if expected > top else ["first", "second"]
    )


def test_reranking_never_adds_a_tool_and_keeps_an_exact_name_first() -> None:
    index = index_of(("read_file", "read a file"), ("reader", "read the file read_file"))
    found = index.find("read_file", limit=lrn.CANDIDATES)
    exact = index.exact("read_file", None)
    learned = lrn.Learned({("s", "reader"): 10_000, ("s", "absent"): 10_000})
    moved = lrn.reranked(found, learned, limit=5, exact=exact)
    assert moved.hits[0].doc.tool == "read_file"
    assert len(found.hits) == 2
    assert {hit.doc.tool for hit in moved.hits} == {hit.doc.tool for hit in found.hits}


def test_a_good_answer_stays_good_when_a_weaker_match_is_lifted_first() -> None:
    index = index_of(
        ("mailer", "send mail and archive it"),
        ("page", "page"),
        ("x1", "list folders"),
        ("x2", "list files"),
        ("x3", "read files"),
    )
    found = index.find("send mail archive page quickly", limit=5)
    assert found.good
    assert found.hits[0].doc.tool == "mailer"
    moved = lrn.reranked(found, lrn.Learned({("s", "page"): 10_000}), limit=5)
    assert moved.hits[0].doc.tool == "page"  # lifted first by use
    assert moved.hits[0].coverage < GOOD_COVERAGE <= moved.hits[1].coverage
    assert moved.good


def test_without_counts_the_answer_is_only_cut_to_the_limit() -> None:
    index = index_of(("a", "x y"), ("b", "x"), ("c", "x z"))
    found = index.find("x", limit=3)
    cut = lrn.reranked(found, lrn.NOTHING, limit=2)
    assert cut.hits == found.hits[:2]
    empty = Found(hits=(), total=0)
    assert lrn.reranked(empty, lrn.Learned({("s", "a"): 1}), limit=2).hits == ()


def test_a_hit_keeps_its_coverage_when_lifted() -> None:
    index = index_of(("a", "send mail"), ("b", "send"))
    found = index.find("send mail", limit=5)
    moved = lrn.reranked(found, lrn.Learned({("s", "b"): 5}), limit=5)
    coverage = {hit.doc.tool: hit.coverage for hit in found.hits}
    before = {hit.doc.tool: hit.score for hit in found.hits}
    assert next(hit.score for hit in moved.hits if hit.doc.tool == "b") > before["b"]
    assert all(hit.coverage == coverage[hit.doc.tool] for hit in moved.hits)


# ---------------------------------------------------- recording, merging, bounds


def test_the_recorder_counts_and_forgets_and_keeps_the_latest_when_full() -> None:
    recorder = lrn.UseRecorder(maxlen=3)
    for tool in ("a", "b", "a", "c"):
        recorder.called("s", tool)
    assert len(recorder) == 3
    assert recorder.taken() == {("s", "b"): 1, ("s", "a"): 1, ("s", "c"): 1}
    assert recorder.taken() == {}


def test_merging_adds_counts() -> None:
    assert lrn.merged({("s", "a"): 2}, {("s", "a"): 3, ("t", "b"): 1, ("t", "c"): 0}) == {
        ("s", "a"): 5,
        ("t", "b"): 1,
    }


def test_bounds_keep_the_most_called_tools_and_halve_past_the_total() -> None:
    counts = {("s", f"t{i}"): i for i in range(1, 11)}
    kept = lrn.bounded(counts, max_tools=3, max_calls=1000)
    assert kept == {("s", "t10"): 10, ("s", "t9"): 9, ("s", "t8"): 8}
    halved = lrn.bounded({("s", "a"): 60, ("s", "b"): 50, ("s", "c"): 1}, max_tools=10, max_calls=100)
    assert halved == {("s", "a"): 30, ("s", "b"): 25}  # c halved to 0 and dropped
    assert sum(lrn.bounded({("s", "a"): 10**9}).values()) <= lrn.MAX_CALLS
    many = {("s", f"t{i}"): 1 + i % 7 for i in range(lrn.MAX_TOOLS * 2)}
    assert len(lrn.merged({}, many)) == lrn.MAX_TOOLS


# ---------------------------------------------------------------- the file


def test_the_file_holds_names_and_counts_only(tmp_path: Path) -> None:
    path = lrn.use_file(tmp_path)
    assert lrn.load(path) == lrn.NOTHING
    saved = lrn.save(path, {("github", "create_issue"): 2, ("fs", "read"): 1})
    assert saved.calls == {("github", "create_issue"): 2, ("fs", "read"): 1}
    assert json.loads(path.read_text()) == {
        "format": "assern-search-use",
        "version": 1,
        "tools": {"fs": {"read": 1}, "github": {"create_issue": 2}},
    }
    again = lrn.save(path, {("fs", "read"): 4})
    assert again.calls == {("github", "create_issue"): 2, ("fs", "read"): 5}
    assert lrn.load(path) == again
    assert lrn.parse(lrn.render(again.calls)) == again.calls


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"format": "other", "version": 1, "tools": {}}',
        '{"format": "assern-search-use", "version": 2, "tools": {}}',
        '{"format": "assern-search-use", "version": 1, "tools": []}',
        '{"format": "assern-search-use", "version": 1, "tools": {"s": 3}}',
        '{"format": "assern-search-use", "version": 1, "tools": {"s": {"t": -1}}}',
        '{"format": "assern-search-use", "version": 1, "tools": {"s": {"t": true}}}',
    ],
)
def test_a_bad_file_is_set_aside_and_counting_starts_again(tmp_path: Path, text: str) -> None:
    path = lrn.use_file(tmp_path)
    path.write_text(text)
    with pytest.raises(lrn.BadUseFile):
        lrn.load(path)
    assert not path.exists()
    assert path.with_name("search-use.json.bad").read_text() == text
    path.write_text(text)
    assert lrn.save(path, {("s", "t"): 1}).calls == {("s", "t"): 1}
    assert lrn.load(path).calls == {("s", "t"): 1}


def _save_many(folder: str, tool: str, times: int) -> None:
    path = lrn.use_file(Path(folder))
    for _ in range(times):
        lrn.save(path, {("s", tool): 1, ("s", "shared"): 1})


def test_several_writers_lose_no_count(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_save_many, args=(str(tmp_path), f"t{i}", 40)) for i in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(30)
        assert writer.exitcode == 0
    counts = lrn.load(lrn.use_file(tmp_path)).calls
    assert counts == {("s", "t0"): 40, ("s", "t1"): 40, ("s", "t2"): 40, ("s", "shared"): 120}


# ---------------------------------------------------------------- the actor


async def test_the_actor_merges_in_the_background_and_at_the_end(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = lrn.use_file(tmp_path)
    lrn.save(path, {("s", "old"): 2})  # an earlier run's counts
    published: Cell[lrn.Learned] = Cell(lrn.NOTHING)
    recorder = lrn.UseRecorder()
    actor = LearnedActor(published, recorder, enabled=lambda: True, path=path, interval=5.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await published.changed(0)
        assert published.value.calls == {("s", "old"): 2}
        recorder.called("s", "new")
        recorder.called("s", "new")
        version = published.version
        await published.changed(version)  # the next merge (the clock jumps)
        assert published.value.calls == {("s", "old"): 2, ("s", "new"): 2}
        assert lrn.load(path) == published.value
        recorder.called("s", "last")
        nursery.cancel_scope.cancel()
    assert lrn.load(path).calls == {("s", "old"): 2, ("s", "new"): 2, ("s", "last"): 1}  # at shutdown
    assert len(recorder) == 0


async def test_turned_off_the_actor_drops_the_calls_and_publishes_no_counts(tmp_path: Path) -> None:
    path = lrn.use_file(tmp_path)
    lrn.save(path, {("s", "old"): 2})
    on = [True]
    published: Cell[lrn.Learned] = Cell(lrn.NOTHING)
    recorder = lrn.UseRecorder()
    actor = LearnedActor(published, recorder, enabled=lambda: on[0], path=path)
    await actor.merge()
    assert published.value.calls == {("s", "old"): 2}
    on[0] = False
    recorder.called("s", "new")
    await actor.merge()
    assert published.value == lrn.NOTHING
    assert len(recorder) == 0
    assert lrn.load(path).calls == {("s", "old"): 2}
    on[0] = True
    await actor.merge()  # read again once turned back on
    assert published.value.calls == {("s", "old"): 2}


async def test_no_file_is_made_before_a_call_and_a_deleted_file_is_forgotten(tmp_path: Path) -> None:
    path = lrn.use_file(tmp_path / "home")
    published: Cell[lrn.Learned] = Cell(lrn.NOTHING)
    recorder = lrn.UseRecorder()
    actor = LearnedActor(published, recorder, enabled=lambda: True, path=path)
    await actor.merge()
    assert not (tmp_path / "home").exists()
    recorder.called("s", "a")
    await actor.merge()
    assert published.value.calls == {("s", "a"): 1}
    path.unlink()
    await actor.merge()
    assert published.value == lrn.NOTHING


async def test_counts_that_cannot_be_written_are_kept_and_tried_again(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    published: Cell[lrn.Learned] = Cell(lrn.NOTHING)
    recorder = lrn.UseRecorder()
    actor = LearnedActor(published, recorder, enabled=lambda: True, path=lrn.use_file(blocked))
    recorder.called("s", "a")
    await actor.merge()  # the folder cannot be made: kept in memory
    blocked.unlink()
    recorder.called("s", "a")
    await actor.merge()
    assert lrn.load(lrn.use_file(blocked)).calls == {("s", "a"): 2}
