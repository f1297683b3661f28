"""Why a search's answer ranks as it does (`assernctl search --explain`).

For each tool of the answer: the query's words it matches (itself or through a
synonym), in which of its fields and how often, each word's idf and what it adds to the
score (index.py, BM25F), whether the query named the tool exactly (it then comes first);
with the meaning weighed in too (the `assern[semantic]` extra), the tool's cosine
similarity to the query, its rank by words and by meaning, and the factor that gives
its score (1 + weight x similarity, semantic.py), or that the meaning alone found it
(it then follows the tools the words found); its server (no server
score is used in the ranking: the server's name and `instructions` count as two of the
tool's fields, shown with the others); the share of the tool's own name the query asks
for and the bonus that gives its score (index.py, `NAME_BONUS`); with `after` (a
search as a connection that called that server last, `--after`), whether the tool is
lifted as one of that server's (session.py, `SESSION_BONUS`) and, if not, why; and what
learning from use adds: how often the tool was called after a search and the share of
the answer's best score that adds (learned.py), or that learning is off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assern.actors.router.catalog import Catalog, search_sources
from assern.actors.search import meta_tools
from assern.actors.search.index import SearchIndex
from assern.actors.search.meta_tools import BadArguments
from assern.actors.search.semantic import CANDIDATES, MEANING_WEIGHT, Semantic
from assern.actors.search.session import SESSION_BONUS, not_lifted

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from assern.actors.backend.handle import BackendHandle
    from assern.actors.search.index import Doc
    from assern.actors.search.learned import Learned


def explain_search(
    catalog: Catalog,
    directory: Mapping[str, BackendHandle],
    arguments: Mapping[str, Any] | None,
    names: Sequence[str],
    semantic: Semantic | None = None,
    learned: Learned | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """The explanation of each of `names` (the tools a search answered, in its order);
    `learned` is None when learning from use is off; `after`, the server called last."""
    index = catalog.search
    if index is None:  # as `assernctl search` does in any exposure
        listings = [
            h.listing for h in directory.values() if h.listing is not None and h.name in catalog.servers
        ]
        index = SearchIndex().updated(search_sources(listings, catalog))
    try:
        request = meta_tools.search_request(arguments, sorted(catalog.servers))
    except BadArguments:
        return {}
    docs = {doc.name: doc for doc in index.docs()}
    by_words: dict[str, int] = {}
    by_meaning: dict[str, int] = {}
    similarity: Callable[[Doc], float | None] | None = None
    if semantic is not None:
        lexical, _ = index.ranked(request.query, limit=CANDIDATES, server=request.server)
        by_words = {doc.name: rank for rank, (doc, _) in enumerate(lexical, start=1)}
        similar, similarity = semantic.compared(index, request.query, request.server)
        by_meaning = {doc.name: rank for rank, (doc, _) in enumerate(similar, start=1)}
    explained: dict[str, Any] = {}
    for name in names:
        doc = docs.get(name)
        if doc is None:
            continue
        entry = index.explain(request.query, doc)
        entry["server"] = {"name": doc.server, "score": "not used"}
        if after is not None:
            entry["session"] = session_entry(doc.server, entry["coverage"], after, request.server)
        entry["learned"] = (
            None
            if learned is None
            else {
                "calls": learned.calls.get((doc.server, doc.tool), 0),
                "boost": round(learned.boost(doc.server, doc.tool), 3),
            }
        )
        if similarity is not None:
            words_rank = by_words.get(name)
            close = similarity(doc)
            entry["meaning"] = {
                "words_rank": words_rank,
                "meaning_rank": by_meaning.get(name),
                "similarity": None if close is None else round(close, 3),
                # found by words: its score times this; by meaning alone: after them
                "factor": round(1.0 + MEANING_WEIGHT * (close or 0.0), 3) if words_rank else None,
            }
        explained[name] = entry
    return explained


def session_entry(server: str, coverage: float, after: str, searched: str | None) -> dict[str, Any]:
    """Whether a tool of `server` matching `coverage` of the query is lifted in a search
    after a call of `after` (session.py), and why not when it is not."""
    why = "the search is of one server" if searched is not None else not_lifted(server, coverage, after)
    if why is None:
        return {"after": after, "lifted": True, "factor": 1.0 + SESSION_BONUS}
    return {"after": after, "lifted": False, "factor": 1.0, "why": why}


def explanation_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    """One tool's explanation as text, a line per matched word."""
    lines = [f"{name}: words {entry['words_score']}, covers {entry['coverage']:.0%} of the query"]
    if entry["exact_name"]:
        lines.append("  named exactly by the query: first")
    named = entry.get("name")
    if named is not None and named["share"]:
        lines.append(
            f"  name: {named['share']:.0%} of its words {named['terms']} asked for,"
            f" score x{1 + named['bonus']:.2f}"
        )
    for term in entry["terms"]:
        fields = ", ".join(f"{field} x{count}" for field, count in term["fields"].items())
        via = f" (for {term['synonym_of']!r})" if term["synonym_of"] else ""
        lines.append(f"  {term['term']!r}{via}: idf {term['idf']}, in {fields}, adds {term['adds']}")
    meaning = entry.get("meaning")
    if meaning is not None:
        ranks = f"rank by words {meaning['words_rank']}, by meaning {meaning['meaning_rank']}"
        if meaning["similarity"] is None:
            lines.append(f"  meaning: no vector yet, ranked by words alone ({ranks})")
        elif meaning["factor"] is None:
            lines.append(
                f"  meaning: similarity {meaning['similarity']}, found by meaning alone:"
                f" after the tools the words found ({ranks})"
            )
        else:
            lines.append(
                f"  meaning: similarity {meaning['similarity']}, score x{meaning['factor']:.2f} ({ranks})"
            )
    else:
        lines.append("  meaning: not ranked (ranking by words only)")
    server = entry.get("server")
    if server is not None:
        lines.append(f"  server {server['name']!r}: server score not used (its name is a field above)")
    lifted = entry.get("session")
    if lifted is not None:
        if lifted["lifted"]:
            lines.append(f"  called last: {lifted['after']!r}, its tool: score x{lifted['factor']:.2f}")
        else:
            lines.append(f"  called last: {lifted['after']!r}, not lifted ({lifted['why']})")
    if "learned" in entry:
        learned = entry["learned"]
        if learned is None:
            lines.append('  learned: off ([settings.search] learn = "off")')
        else:
            times = "time" if learned["calls"] == 1 else "times"
            lines.append(
                f"  learned: called {learned['calls']} {times} after a search,"
                f" adds {learned['boost']:.0%} of the best score"
            )
    return lines
