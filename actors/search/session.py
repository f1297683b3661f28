"""The server a connection called last lifts its tools in that connection's next search.

An agent works through a task a step at a time, and the steps of a task mostly use one
service while their own words seldom name it: "merge the pull request" in a Bitbucket
task, "put both emoji on it" after reading a Discord channel. The search sees only the
step's words; the connection knows which server it called last (routing.py records it
on each answered call). So a search on that connection re-ranks its best 20 (as
learning from use does), each of that server's tools among them scored times
1 + `SESSION_BONUS`: of two tools that match alike, the one of the server the
agent is working with comes first, while a tool of another server that matches much
better still wins (a score at least twice as high), and a tool that shares no word
with the query (found by the meaning alone, with `assern[semantic]`) is not lifted.
Nothing is kept beyond the connection, and a search restricted to one server (`server`
argument) is left as it is. Adding that server's own best 10 to the candidates found one
step more of 243 on the tuning part and cost a second search (+0.3 ms median at 10,000
tools): not done.

The bonus was chosen on the tuning part of the search benchmark's
labelled steps, each task's steps searched in order (ops/bench/search/session.py; see
docs/search-evaluation.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from assern.actors.search.rescore import rescored

if TYPE_CHECKING:
    from collections.abc import Iterable

    from assern.actors.search.index import Doc, Found

#: a tool of the server the connection called last: its score times 1 + this
SESSION_BONUS = 1.0


def not_lifted(tool_server: str, coverage: float, server: str) -> str | None:
    """Why a tool of `tool_server` matching `coverage` of the query is not lifted after a
    call of `server`, or None when it is (`assernctl search --after --explain` says this)."""
    if tool_server != server:
        return "another server"
    if coverage <= 0:
        return "it shares no word with the query"
    return None


def lifted(found: Found, server: str, limit: int, exact: Iterable[Doc] = ()) -> Found:
    """`found` (the ranking's best, usually more than `limit`) with each tool of `server`
    scored times 1 + `SESSION_BONUS` if it shares a word with the query (one found by
    meaning alone is not lifted), best first, cut to `limit`. Tools named exactly by the
    query stay first; equal scores keep the order of `found`."""
    lift = [not_lifted(hit.doc.server, hit.coverage, server) is None for hit in found.hits]
    if not any(lift):
        return attrs.evolve(found, hits=found.hits[:limit])
    scores = [
        hit.score * (1.0 + SESSION_BONUS) if up else hit.score
        for hit, up in zip(found.hits, lift, strict=True)
    ]
    return rescored(found, scores, limit, exact)
