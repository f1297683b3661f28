"""Fusing the lexical ranking with the meaning's (context/fusion.py): by hand-computed values."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from assern.context.fusion import (
    RRF_K,
    Fusion,
    Meaning,
    blend,
    fuse,
    meaning_only,
    parse_fusion,
    rrf,
)
from assern.context.store import Hit


def hit(chunk_id: int, score: float = 0.0, path: str | None = None) -> Hit:
    return Hit(
        chunk_id=chunk_id,
        path=path or f"f{chunk_id}.py",
        start_line=1,
        end_line=2,
        kind="function",
        symbol=None,
        text=f"chunk {chunk_id}",
        score=score,
    )


def fetcher(calls: list[list[int]]) -> Callable[[list[int]], list[Hit]]:
    def fetch(ids: list[int]) -> list[Hit]:
        calls.append(list(ids))
        return [hit(i) for i in ids if i != 404]  # 404: deleted since its vector was held

    return fetch


def test_rrf_sums_weight_over_k_plus_rank() -> None:
    scores = rrf([[1, 2, 3], [3, 4]], (1.0, 0.5))
    assert scores == pytest.approx(
        {
            1: 1 / (RRF_K + 1),
            2: 1 / (RRF_K + 2),
            3: 1 / (RRF_K + 3) + 0.5 / (RRF_K + 1),
            4: 0.5 / (RRF_K + 2),
        }
    )
    # found by both, 3 overtakes the words' first
    assert max(scores, key=scores.__getitem__) == 3


def test_blend_scales_each_ranking_to_its_best() -> None:
    scores = blend({1: 10.0, 2: 5.0}, {2: 0.8, 3: 0.4}, 0.5)
    assert scores == pytest.approx({1: 1.0, 2: 0.5 + 0.5 * 1.0, 3: 0.5 * 0.5})
    assert blend({}, {7: 0.0}, 1.0) == {}  # nothing similar above the floor, no words: nothing
    assert blend({1: 2.0}, {}, 1.0) == {1: 1.0}


def test_fuse_fetches_only_what_the_meaning_alone_found_and_keeps_the_fused_score() -> None:
    calls: list[list[int]] = []
    lexical = [hit(1, 9.0), hit(2, 3.0)]
    fused = fuse(lexical, [(2, 0.9), (5, 0.7), (404, 0.6)], fetcher(calls), Fusion(method="rrf", weight=1.0))
    assert calls == [[5, 404]]
    assert [h.chunk_id for h in fused] == [2, 1, 5]  # 404 is gone from the index: left out
    assert fused[0].score == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert fused[0].text == "chunk 2"  # the lexical hit itself, with its new score


def test_fuse_by_blend_orders_by_the_blended_score() -> None:
    lexical = [hit(1, 10.0), hit(2, 9.0)]
    fused = fuse(lexical, [(2, 0.9), (1, 0.1)], fetcher([]), Fusion(method="blend", weight=0.5))
    assert [h.chunk_id for h in fused] == [2, 1]
    assert [h.score for h in fused] == pytest.approx([0.9 + 0.5, 1.0 + 0.5 * (0.1 / 0.9)])


def test_without_vectors_the_lexical_ranking_is_kept_as_it_is() -> None:
    calls: list[list[int]] = []
    lexical = [hit(1, 2.0), hit(2, 1.0)]
    assert fuse(lexical, [], fetcher(calls), Fusion()) == lexical
    assert calls == []


def test_the_meaning_alone_ranks_by_similarity() -> None:
    found = meaning_only([(3, 0.8), (404, 0.7), (1, 0.5)], fetcher([]))
    assert [(h.chunk_id, h.score) for h in found] == [(3, 0.8), (1, 0.5)]


class FakeVectors:
    def __init__(self, similar: list[tuple[int, float]]) -> None:
        self.similar = similar
        self.asked: list[tuple[str, int]] = []
        self.globs: list[str | None] = []

    def nearest(self, question: str, limit: int) -> list[tuple[int, float]]:
        self.asked.append((question, limit))
        return self.similar[:limit]

    def fetch(self, path_glob: str | None) -> Callable[[list[int]], list[Hit]]:
        self.globs.append(path_glob)
        return lambda ids: [hit(i, path="src/a.py" if i == 5 else "docs/b.md") for i in ids]

    @property
    def pending_files(self) -> int:
        return 3


def test_the_hook_fuses_or_ranks_by_meaning_alone_and_passes_the_path_filter() -> None:
    vectors = FakeVectors([(5, 0.9), (6, 0.8)])
    fused = Meaning(vectors, Fusion()).candidates("where", [hit(6, 4.0)], "src/*")
    assert [h.chunk_id for h in fused] == [6, 5]
    alone = Meaning(vectors, None).candidates("where", [hit(6, 4.0)], None)
    assert [h.chunk_id for h in alone] == [5, 6]
    assert vectors.globs == ["src/*", None]
    assert vectors.asked[0][1] > vectors.asked[1][1]  # a path filter asks for more neighbours
    assert Meaning(vectors, None).pending() == 3


@pytest.mark.parametrize(
    ("text", "fusion"),
    [
        ("rrf", Fusion(method="rrf")),
        ("blend", Fusion(method="blend")),
        ("rrf:1.5", Fusion(method="rrf", weight=1.5)),
        ("blend:0", Fusion(method="blend", weight=0.0)),
    ],
)
def test_parse_fusion(text: str, fusion: Fusion) -> None:
    assert parse_fusion(text) == fusion


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("vote", "expected rrf or blend"),
        ("rrf:x", "the weight 'x' is not a number"),
        ("rrf:-1", "the weight must be 0 or more"),
        ("rrf:nan", "the weight must be 0 or more"),
    ],
)
def test_parse_fusion_refuses_saying_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fusion(text)
