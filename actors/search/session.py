"""The server a connection called last lifts its tools in that connection's next search.

An agent works through a task a step at a time, and the steps of a task mostly use one
service while their own words seldom name it: "merge the pull request" in a Bitbucket
task, "put both emoji on it" after reading a Discord channel. The search sees only the
step's words; the connection knows which server it called last (routing.py records it
on each answered call). So a search on that connection takes the best of that server's
tools for the same query beside the best of all, and scores each of that server's tools
times 1 + `SESSION_BONUS`: of two tools that match alike, the one of the server the
agent is working with comes first, while a tool of another server that matches much
better still wins (a score at least twice as high), and a tool that shares no word
with the query (found by the meaning alone, with `assern[semantic]`) is not lifted.
Nothing is kept beyond the connection, and a search restricted to one server (`server`
argument) is left as it is.

The bonus and the pool were chosen on the tuning part of the search benchmark's
labelled steps, each task's steps searched in order (ops/bench/search/session.py; see
docs/search-evaluation.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

    from assern.actors.search.index import Doc, Found, Hit

#: a tool of the server the connection called last: its score times 1 + this
SESSION_BONUS = 1.0
#: how many of that server's own best tools join the candidates
OWN = 10


def lifted(found: Found, own: Found, server: str, limit: int, exact: Iterable[Doc] = ()) -> Found:
    """`found` (the best of all tools) with `own` (the best of `server`'s tools for the
    same query, ranked the same way) added, each tool of `server` scored times
    1 + `SESSION_BONUS` if it shares a word with the query (one found by meaning alone
    is not lifted), best first, cut to `limit`. Tools named exactly by the query stay
    first; equal scores keep the order of `found`, then of `own`."""
    pool: dict[str, Hit] = {}
    for hit in (*found.hits, *own.hits):
        pool.setdefault(hit.doc.name, hit)
    lift = {name for name, hit in pool.items() if hit.doc.server == server and hit.coverage > 0}
    if not lift:
        return attrs.evolve(found, hits=found.hits[:limit])
    named = {doc.name for doc in exact}
    scored = [
        (hit.doc.name in named, hit.score * (1.0 + SESSION_BONUS) if name in lift else hit.score, i, hit)
        for i, (name, hit) in enumerate(pool.items())
    ]
    scored.sort(key=lambda item: (not item[0], -item[1], item[2]))
    hits = tuple(attrs.evolve(hit, score=score) for _, score, _, hit in scored[:limit])
    return attrs.evolve(found, hits=hits, reranked=True)
