"""Steps searched in order, as an agent searches them: the server called last lifted.

    .venv/bin/python ops/bench/search/session.py            # the tuning part, two folds
    .venv/bin/python ops/bench/search/session.py --heldout  # the held-out part (once)

A multi-step task's steps are searched one after the other on one connection. After each
step the agent calls a tool: the first right one in the answer's first five, else (it
found it some other way) the step's first labelled tool; the next step's search then
lifts that tool's server among the best 20 (actors/search/session.py, `lifted`, with
its `SESSION_BONUS`; `--bonus` tries others). Recall@5 of the steps is printed with the server
called last lifted and without, both per task (a connection per task) and over one
connection that works through every task in a random order (five recorded orders), where
the first step of a task is searched after the last call of another task. With
`--heldout`, the held-out part, with its 95% interval and the steps found more and less
often than without (spread.py). `--words W` (tuning part) also tries a candidate: the
previous step's words carried into the next search at weight W. See
docs/search-evaluation.md.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from assern.actors.search import session
from assern.actors.search.index import SearchIndex
from assern.actors.search.learned import CANDIDATES
from assern.actors.search.rescore import rescored

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import run  # noqa: E402
import spread  # noqa: E402
from labels import Query  # noqa: E402

FOLD_SEED = 2911  # the folds of candidates.py
ORDERS = (1, 2, 3, 4, 5)  # the seeds of the one-connection orders


def answer(
    index: SearchIndex,
    query: str,
    recent: str | None,
    bonus: float,
    before: str | None = None,
    carry: float = 0.0,
) -> list[str]:
    """The first ten names `search_tools` answers (by words) after a call of `recent`;
    with `carry`, the best 20 also scored `carry` x the share of the best score they get
    for the connection's previous search `before` (a candidate, not what assern does)."""
    found = index.find(query, limit=CANDIDATES)
    if before is not None and carry and found.hits:
        earlier = dict(index.ranked(before, limit=200)[0])
        top, best = max(earlier.values(), default=1.0), found.hits[0].score
        scores = [hit.score + carry * best * earlier.get(hit.doc, 0.0) / top for hit in found.hits]
        found = rescored(found, scores, CANDIDATES, index.exact(query, None))
    if recent is not None and bonus:
        kept = session.SESSION_BONUS
        session.SESSION_BONUS = bonus
        try:
            found = session.lifted(found, recent, 10, index.exact(query, None))
        finally:
            session.SESSION_BONUS = kept
    return [hit.doc.name for hit in found.hits[:10]]


def tasks(asked: Sequence[Query], part: str, units: set[str] | None = None) -> list[list[Query]]:
    """The steps of each task of the part, in their order, task by task."""
    _seed, heldout, tuning = labels.read_split()
    grouped: dict[str, list[Query]] = {}
    for query in asked:
        chosen = query.kind == "step" and labels.part(query, heldout, tuning) == part
        if chosen and (units is None or query.unit in units):
            grouped.setdefault(query.unit, []).append(query)
    return list(grouped.values())


def searched(
    index: SearchIndex, groups: Sequence[list[Query]], bonus: float, carry: bool, words: float = 0.0
) -> list[float]:
    """Each step found in the first five (1.0) or not, the steps searched in order; the
    server called last carried from task to task when `carry` (one connection); the
    previous step's words carried at `words` (`answer`)."""
    server_of = {doc.name: doc.server for doc in index.docs()}
    shares: list[float] = []
    recent: str | None = None
    for steps in groups:
        if not carry:
            recent = None
        before: str | None = None
        for query in steps:
            names = answer(index, query.text, recent, bonus, before, words)[:5]
            before = query.text
            need = query.needs[0]
            hit = next((name for name in names if name in need), None)
            shares.append(1.0 if hit is not None else 0.0)
            recent = server_of[hit if hit is not None else min(need)]
    return shares


def shuffled(groups: Sequence[list[Query]], seed: int) -> list[list[Query]]:
    order = list(groups)
    random.Random(seed).shuffle(order)
    return order


def mean(values: Sequence[float]) -> float:
    return sum(values) / max(len(values), 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--heldout", action="store_true", help="the held-out part (run once)")
    parser.add_argument("--bonus", type=float, action="append", help="bonus to try (repeatable)")
    parser.add_argument(
        "--words",
        type=float,
        action="append",
        help="also carry the previous step's words at this weight (a candidate; tuning part, repeatable)",
    )
    args = parser.parse_args(argv)
    _catalog, index, asked = run.fixture_catalog()
    bonuses = args.bonus or [session.SESSION_BONUS]
    if args.heldout:
        groups = tasks(asked, "heldout")
        base = searched(index, groups, 0.0, carry=False)
        print(f"held-out steps: {len(base)}, of {len(groups)} tasks; Recall@5, its 95% interval,")
        print("and the steps found more and less often than without the server called last")
        low, high = spread.interval(base)
        print(f"{'without, per task':<39} {mean(base):.3f} [{low:.3f}, {high:.3f}]")
        for bonus in bonuses:
            lines = [("per task", searched(index, groups, bonus, carry=False), base)]
            for seed in ORDERS:
                order = shuffled(groups, seed)
                alone = searched(index, order, 0.0, carry=True)
                lines.append(
                    (f"one connection, order {seed}", searched(index, order, bonus, carry=True), alone)
                )
            for title, shares, against in lines:
                low, high = spread.interval(shares)
                versus = spread.paired(against, shares)
                print(
                    f"bonus {bonus:<4} {title:<28} {mean(shares):.3f} [{low:.3f}, {high:.3f}]"
                    f"  +{versus.gained} -{versus.lost} p={versus.p}"
                )
        return 0
    _seed, heldout, tuning = labels.read_split()
    units = sorted({q.unit for q in asked if labels.part(q, heldout, tuning) == "tuning"})  # as candidates.py
    random.Random(FOLD_SEED).shuffle(units)
    first = set(units[: len(units) // 2])
    folds = {"A": first, "B": set(units) - first}
    print("tuning steps, Recall@5: fold A, fold B, both; per task, then one connection (orders 1-5)")
    for bonus in [0.0, *bonuses]:
        per_fold = [
            searched(index, tasks(asked, "tuning", fold), bonus, carry=False) for fold in folds.values()
        ]
        both = per_fold[0] + per_fold[1]
        groups = tasks(asked, "tuning")
        carried = [mean(searched(index, shuffled(groups, seed), bonus, carry=True)) for seed in ORDERS]
        print(
            f"bonus {bonus:<4} A {mean(per_fold[0]):.3f} B {mean(per_fold[1]):.3f} both {mean(both):.3f}"
            f"  | one connection " + " ".join(f"{value:.3f}" for value in carried)
        )
        for words in args.words or []:
            fold_words = [
                searched(index, tasks(asked, "tuning", fold), bonus, carry=False, words=words)
                for fold in folds.values()
            ]
            print(
                f"bonus {bonus:<4} words {words:<4} A {mean(fold_words[0]):.3f} B {mean(fold_words[1]):.3f}"
                f" both {mean(fold_words[0] + fold_words[1]):.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
