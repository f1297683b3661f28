"""How far a ranking can reach: the ceilings under the steps' Recall@5.

    .venv/bin/python ops/bench/search/ceiling.py                     # the tuning part
    .venv/bin/python ops/bench/search/ceiling.py --heldout           # the held-out part
    .venv/bin/python ops/bench/search/ceiling.py --model minilm      # with a meaning model

Every change tried to the search re-orders the best 20 by words (the name bonus, the
server called last, learning from use, the meaning blended in) or adds weight to words
a query and a tool share. Neither can find a tool outside what it starts from, so for
each part this prints, for steps and for the needs of whole tasks:

- Recall@5, @10 and @20 by words (the search as it is, without the extra): @20 is the
  most any re-ordering of the best 20 can reach;
- the share whose right tool shares a word (or a synonym) with the query at all: the
  most any ranking by words can reach, whatever its weights;
- with `--model` (a meaning model of models.py, if installed): the meaning's Recall@5
  and @20 alone, and the share with a right tool in the first five of the words or of
  the meaning (the most any ranking that takes its five from those two lists can
  reach), and in the first 20 of either.

Figures of the held-out part choose nothing: they say how far the target is from what
the search could reach at best. See docs/search-evaluation.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from assern.actors.router.catalog import Catalog
from assern.actors.search import semantic as sem
from assern.actors.search.index import Doc, SearchIndex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import run  # noqa: E402
from labels import Query  # noqa: E402

DEPTH = 20  # what the re-rankings re-order (learned.CANDIDATES)
Ranker = Callable[[str], list[str]]


def words_ranker(index: SearchIndex) -> Ranker:
    return lambda query: [hit.doc.name for hit in index.find(query, limit=DEPTH).hits]


def shares_a_word(index: SearchIndex, query: Query, docs: dict[str, Doc] | None = None) -> list[bool]:
    """For each need of `query`: whether one of its tools shares a word (or a synonym)
    with the query (`docs`: the index's tools by name, when already at hand)."""
    docs = docs if docs is not None else {doc.name: doc for doc in index.docs()}
    covered = index.coverage(query.text)
    return [any(name in docs and covered(docs[name]) > 0 for name in need) for need in query.needs]


def within(ranked: Sequence[str], query: Query, k: int) -> list[bool]:
    """For each need of `query`: whether a right tool is in the first `k` of `ranked`."""
    first = set(ranked[:k])
    return [bool(need & first) for need in query.needs]


def share(found: Sequence[list[bool]]) -> float:
    """The mean over queries of each one's share of needs found (Recall@k's weighting)."""
    return sum(sum(needs) / len(needs) for needs in found) / max(len(found), 1)


def ceilings(index: SearchIndex, asked: Sequence[Query], meaning: Ranker | None = None) -> dict[str, float]:
    """The figures of the module's docstring for `asked`, each a share of needs."""
    by_words = words_ranker(index)
    words = {query.text: by_words(query.text) for query in asked}
    docs = {doc.name: doc for doc in index.docs()}
    figures = {f"words R@{k}": share([within(words[q.text], q, k) for q in asked]) for k in (5, 10, DEPTH)}
    figures["a word shared"] = share([shares_a_word(index, q, docs) for q in asked])
    if meaning is not None:
        meant = {query.text: meaning(query.text) for query in asked}
        for k in (5, DEPTH):
            figures[f"meaning R@{k}"] = share([within(meant[q.text], q, k) for q in asked])
            either = [
                [
                    a or b
                    for a, b in zip(within(words[q.text], q, k), within(meant[q.text], q, k), strict=True)
                ]
                for q in asked
            ]
            figures[f"either R@{k}"] = share(either)
    figures["queries"] = len(asked)
    return {key: round(value, 3) for key, value in figures.items()}


def meaning_ranker(name: str, catalog: Catalog, index: SearchIndex) -> Ranker:
    """The cosine ranking of the meaning model `name` (models.py) over the catalog."""
    import models  # loads the meaning models' code only when one is asked for

    model = models.MODEL_CLASSES[name]()
    routes = list(catalog.tools.values())
    keys = [sem.tool_key(r.server, r.original, r.tool) for r in routes]
    matrix = model.passages([sem.tool_text(r.original, r.tool) for r in routes])
    semantic = sem.Semantic(model, sem.Vectors.empty(matrix.shape[1], name).extended(keys, matrix))
    return lambda query: [doc.name for doc, _ in semantic.ranked(index, query, None)][:DEPTH]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--heldout", action="store_true", help="the held-out part")
    parser.add_argument("--model", help="also this meaning model of models.py (wordllama, minilm, ...)")
    args = parser.parse_args(argv)
    catalog, index, asked = run.fixture_catalog()
    meaning = meaning_ranker(args.model, catalog, index) if args.model else None
    _seed, heldout, tuning = labels.read_split()
    part = "heldout" if args.heldout else "tuning"
    for kind, title in (("step", "steps"), ("task", "whole tasks, by needs")):
        chosen = [q for q in asked if q.kind == kind and labels.part(q, heldout, tuning) == part]
        figures = ceilings(index, chosen, meaning)
        print(f"{part} {title}: " + ", ".join(f"{key} {value}" for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
