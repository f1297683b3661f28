"""Learning from use, simulated: does what was called before help find the tools of tasks
never seen?

    .venv/bin/python ops/bench/search/learning.py             # the figures
    .venv/bin/python ops/bench/search/learning.py --folds     # also the tuning part's 2-fold check

The use log is built from the tuning part of the labelled queries alone (split.toml):
each tuning query is searched by words (limit 8, as search_tools answers), and for each
of its needs the first right tool in the answer is "called", as an agent that found it
would. The held-out queries are then ranked with that log (actors/search/learned.py)
and scored as run.py scores them. Two ways of learning are compared with no learning:

- prior: a per-tool count, the boost `MAX_BOOST * n / (n + HALF)` of the best score
  (what assern does);
- terms: a query-word -> tool association, the same boost of the calls of the tool
  after searches that used the query's words (summed over the words).

`--folds` checks the constants without the held-out part: the tuning units are cut in
two halves (by a hash of their name), the log is built from one half and scored on the
other, both ways round. See docs/search-evaluation.md.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from assern.actors.router.catalog import Catalog
from assern.actors.search import learned as lrn
from assern.actors.search.index import Found, Hit, SearchIndex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import run  # noqa: E402
from labels import Query  # noqa: E402

Key = tuple[str, str]
Use = list[tuple[tuple[str, ...], Key]]


def simulated_use(index: SearchIndex, catalog: Catalog, asked: Sequence[Query]) -> Use:
    """(query terms, tool called) for every need of `asked` whose right tool the answer had."""
    use: Use = []
    for query in asked:
        answer = [hit.doc.name for hit in index.find(query.text, limit=8).hits]
        terms = tuple(dict.fromkeys(index.analyzer.terms(query.text, remember=False)))
        for need in query.needs:
            called = next((name for name in answer if name in need), None)
            if called is not None:
                route = catalog.tools[called]
                use.append((terms, (route.server, route.original)))
    return use


def prior_ranker(index: SearchIndex, use: Use, max_boost: float, half: float) -> run.Ranker:
    learned = lrn.Learned(dict(Counter(key for _, key in use)))

    def rank(query: str) -> list[str]:
        found = index.find(query, limit=lrn.CANDIDATES)
        boosted = _reranked(
            found, lambda doc_key: learned.calls.get(doc_key, 0), max_boost, half, index, query
        )
        return [hit.doc.name for hit in boosted.hits[:10]]

    return rank


def terms_ranker(index: SearchIndex, use: Use, max_boost: float, half: float) -> run.Ranker:
    by_term: dict[str, Counter[Key]] = {}
    for terms, key in use:
        for term in terms:
            by_term.setdefault(term, Counter())[key] += 1

    def rank(query: str) -> list[str]:
        terms = set(index.analyzer.terms(query, remember=False))
        found = index.find(query, limit=lrn.CANDIDATES)
        boosted = _reranked(
            found,
            lambda key: sum(by_term[t][key] for t in terms if t in by_term),
            max_boost,
            half,
            index,
            query,
        )
        return [hit.doc.name for hit in boosted.hits[:10]]

    return rank


def _reranked(
    found: Found,
    count: Callable[[Key], int],
    max_boost: float,
    half: float,
    index: SearchIndex,
    query: str,
) -> Found:
    if not found.hits:
        return found
    named = set(index.exact(query.strip(), None))
    top = max(hit.score for hit in found.hits)

    def boost(hit: Hit) -> float:
        n = count((hit.doc.server, hit.doc.tool))
        return top * max_boost * n / (n + half) if n else 0.0

    scored = sorted(
        enumerate(found.hits),
        key=lambda item: (item[1].doc not in named, -(item[1].score + boost(item[1])), item[0]),
    )
    return attrs.evolve(found, hits=tuple(hit for _, hit in scored))


def half_of(unit: str) -> int:
    return hashlib.sha256(unit.encode()).digest()[0] % 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", action="store_true", help="also the 2-fold check within the tuning part")
    args = parser.parse_args()
    catalog, index, asked = run.fixture_catalog()
    _seed, heldout, tuning = labels.read_split()
    tuned = [q for q in asked if labels.part(q, heldout, tuning) == "tuning"]
    held = [q for q in asked if labels.part(q, heldout, tuning) == "heldout"]

    def table(title: str, use: Use, scored: Sequence[Query], settings: Sequence[tuple[float, float]]) -> None:
        kinds = {
            "steps": [q for q in scored if q.kind == "step"],
            "tasks": [q for q in scored if q.kind == "task"],
            "readme steps": [q for q in scored if q.kind == "step" and q.source_set == "readme"],
            "readme tasks": [q for q in scored if q.kind == "task" and q.source_set == "readme"],
        }
        print(f"\n{title}: use log of {len(use)} calls")
        heads = " ".join(f"{head:>6}" for head in ("R@1", "R@5", "R@10", "MRR", "all@5"))
        print(f"{'learning':<22} {'queries':<14} {'n':>4} {heads}")
        plain: run.Ranker = lambda q: [hit.doc.name for hit in index.find(q, limit=10).hits]  # noqa: E731
        rankers: dict[str, run.Ranker] = {"none": plain}
        for max_boost, half in settings:
            rankers[f"prior {max_boost}/{half}"] = prior_ranker(index, use, max_boost, half)
            rankers[f"terms {max_boost}/{half}"] = terms_ranker(index, use, max_boost, half)
        for name, ranker in rankers.items():
            for kind, subset in kinds.items():
                figures = run.recall(ranker, subset)
                keys = ("recall@1", "recall@5", "recall@10", "mrr", "all@5")
                cells = " ".join(f"{figures[key]:>6.3f}" for key in keys)
                print(f"{name:<22} {kind:<14} {figures['queries']:>4} {cells}")

    if args.folds:
        grid = [(0.15, 3.0), (0.3, 3.0), (0.5, 3.0), (0.3, 1.0), (0.3, 10.0)]
        for fold in (0, 1):
            built = [q for q in tuned if half_of(q.unit) == fold]
            scored = [q for q in tuned if half_of(q.unit) != fold]
            table(f"tuning half {fold} -> the other half", simulated_use(index, catalog, built), scored, grid)
    use = simulated_use(index, catalog, tuned)
    table("tuning part -> held-out part", use, held, [(lrn.MAX_BOOST, lrn.HALF)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
