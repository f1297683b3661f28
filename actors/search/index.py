"""The tool search index: BM25F over each tool's fields, updated one server at a time.

Each tool is a document with separately weighted fields (`FIELDS`): its own name split
into words, its description, its parameters' names and descriptions, the server's
name and the server's `instructions`. A term's frequencies in the fields are combined
with each field's weight and length normalisation before the BM25 saturation (BM25F,
Robertson & Zaragoza 2009), so a word in a tool's name counts more than the same word
deep in a long description, and one long description cannot drown the rest.

An index is an immutable snapshot made of one `Segment` per server. `updated` builds the
next snapshot from the previous one, analysing only the servers whose tools changed
(a restart or a `list_changed` of one backend re-reads one segment; the document
frequencies are adjusted by difference). Scores are computed per term on first use and
kept with the snapshot, so repeated queries cost a few dictionary walks.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import mcp_types as types

from assern.actors.search.text import SYNONYM_WEIGHT, Analyzer

FIELDS = ("name", "description", "parameters", "server", "instructions")


@attrs.frozen
class FieldWeights:
    """How much a term counts in each field (`[settings.search] fields`; the defaults
    were chosen by hand and checked on the labelled benchmark of ops/bench/search/)."""

    name: float = 3.0
    description: float = 1.0
    parameters: float = 0.8
    server: float = 1.5
    instructions: float = 0.2

    def as_tuple(self) -> tuple[float, ...]:
        return (self.name, self.description, self.parameters, self.server, self.instructions)


#: length normalisation per field (0: none; names are short and all alike)
_B = (0.3, 0.75, 0.75, 0.0, 0.0)
_K1 = 1.2


@attrs.frozen
class SegmentInput:
    """One server's tools as the index takes them: equal inputs reuse the segment.

    `tools` holds (exposed name, the backend's own name, the tool as the backend listed
    it); the backend's own objects are kept between rebuilds, so an unchanged server
    compares equal by identity at once.
    """

    server: str
    tools: tuple[tuple[str, str, types.Tool], ...]
    instructions: str | None = None


@attrs.frozen(eq=False)
class Doc:
    """One tool in the index."""

    name: str
    server: str
    tool: str
    lengths: tuple[int, ...]
    #: the tool as its server listed it
    definition: types.Tool | None = None
    #: the terms of the tool's own name that the server's name has not (the words that
    #: say what it does: `create_branch`, not `github`)
    named: tuple[str, ...] = ()


@attrs.frozen(eq=False)
class Segment:
    """The analysed tools of one server."""

    source: SegmentInput
    docs: tuple[Doc, ...]
    #: term -> (doc, its frequency in each field) for every doc that has it
    postings: Mapping[str, tuple[tuple[Doc, tuple[int, ...]], ...]]
    #: the sum of each field's length over the docs
    lengths: tuple[int, ...]


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while an index is analysed.

    Analysing builds about a hundred small tuples per tool, none of them in a cycle; the
    collector, triggered by those allocations, would scan the growing index again and
    again (two thirds of the time of indexing 10,000 tools). The analysis never awaits,
    so no other task runs meanwhile; the collector's state is restored after it, and
    reference counting frees everything as usual.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def parameter_texts(schema: Mapping[str, Any] | None) -> list[str]:
    """The names and descriptions of a tool's parameters (nested objects too, one level)."""
    texts: list[str] = []
    properties = (schema or {}).get("properties")
    if not isinstance(properties, Mapping):
        return texts
    for name, spec in properties.items():
        texts.append(str(name))
        if isinstance(spec, Mapping):
            if isinstance(spec.get("description"), str):
                texts.append(spec["description"])
            nested = spec.get("properties")
            if isinstance(nested, Mapping):
                texts.extend(str(key) for key in nested)
    return texts


def analyse(source: SegmentInput, analyzer: Analyzer) -> Segment:
    """The segment of one server's tools."""
    server_terms = analyzer.terms(source.server)
    instruction_terms = analyzer.terms(source.instructions or "")
    docs: list[Doc] = []
    postings: dict[str, list[tuple[Doc, tuple[int, ...]]]] = {}
    totals = [0] * len(FIELDS)
    for exposed, original, tool in source.tools:
        fields = (
            analyzer.terms(original),
            analyzer.terms(tool.description or "") + analyzer.terms(tool.title or ""),
            analyzer.terms_of(parameter_texts(tool.input_schema)),
            server_terms,
            instruction_terms,
        )
        lengths = tuple(len(terms) for terms in fields)
        named = tuple(dict.fromkeys(term for term in fields[0] if term not in server_terms))
        doc = Doc(
            name=exposed, server=source.server, tool=original, lengths=lengths, definition=tool, named=named
        )
        docs.append(doc)
        frequencies: dict[str, list[int]] = {}
        for field, terms in enumerate(fields):
            for term in terms:
                counts = frequencies.get(term)
                if counts is None:
                    counts = frequencies[term] = [0] * len(FIELDS)
                counts[field] += 1
        for term, counts in frequencies.items():
            entry = (doc, tuple(counts))
            listed = postings.get(term)
            if listed is None:
                postings[term] = [entry]
            else:
                listed.append(entry)
        totals = [total + length for total, length in zip(totals, lengths, strict=True)]
    return Segment(
        source=source,
        docs=tuple(docs),
        postings={term: tuple(entries) for term, entries in postings.items()},
        lengths=tuple(totals),
    )


@attrs.frozen
class Hit:
    doc: Doc
    score: float
    #: the share of the query's weight (idf) this tool matches, 0..1
    coverage: float


@attrs.frozen
class Found:
    """A search's answer: the ranked hits and what it searched."""

    hits: tuple[Hit, ...]
    #: how many tools were searched
    total: int
    #: the query's terms the catalog does not know at all
    unknown: tuple[str, ...] = ()
    #: the best cosine similarity of a tool to the query, when ranked semantically too
    similarity: float | None = None
    #: re-ranked by use (learned.py): the best by words need not be first
    reranked: bool = False

    @property
    def good(self) -> bool:
        """Whether the best hit matches enough of the query to be offered as an answer:
        enough of its words, or (ranked semantically too) enough of its meaning."""
        if not self.hits:
            return False
        if self.similarity is None:
            if self.reranked:
                return max(hit.coverage for hit in self.hits) >= GOOD_COVERAGE
            return self.hits[0].coverage >= GOOD_COVERAGE
        # fused: the best by words need not be first
        words = max(hit.coverage for hit in self.hits)
        return self.similarity >= GOOD_SIMILARITY or words >= GOOD_COVERAGE


#: the share of a query's weight the best tool must match for the answer to be "good"
GOOD_COVERAGE = 0.25
#: the cosine similarity to the query a tool must reach to be a good semantic match
GOOD_SIMILARITY = 0.5
#: how much a query word that no tool uses weighs in the coverage
UNKNOWN_SHARE = 0.5
#: hits scoring under this share of the best are left out rather than padding the answer
KEEP_SHARE = 0.15
#: each of the best `NAME_POOL` tools by words has its score times 1 + NAME_BONUS x the
#: share of its own name's terms that the query asks for (itself, or at the synonym
#: weight through a synonym): of two tools that match the query alike, the one named for
#: it comes first. 0 turns it off. Chosen on the tuning part of ops/bench/search/
#: (candidates.py) and kept for its gain on the held-out part (docs/search-evaluation.md).
NAME_BONUS = 0.25
NAME_POOL = 20


class SearchIndex:
    """An immutable snapshot of the searchable tools (see the module's docstring)."""

    def __init__(
        self,
        segments: Mapping[str, Segment] | None = None,
        *,
        analyzer: Analyzer | None = None,
        weights: FieldWeights | None = None,
        df: Mapping[str, int] | None = None,
    ) -> None:
        self.segments: Mapping[str, Segment] = dict(segments or {})
        self.analyzer = analyzer or Analyzer()
        self.weights = weights or FieldWeights()
        self.total = sum(len(segment.docs) for segment in self.segments.values())
        if df is None:
            counted: Counter[str] = Counter()
            for segment in self.segments.values():
                counted.update({term: len(entries) for term, entries in segment.postings.items()})
            df = counted
        self.df: Mapping[str, int] = df
        sums = [0] * len(FIELDS)
        for segment in self.segments.values():
            sums = [a + b for a, b in zip(sums, segment.lengths, strict=True)]
        self._average = tuple(max(total / self.total, 1.0) if self.total else 1.0 for total in sums)
        #: term -> (doc, score) of every doc that has it; filled on first use
        self._scored: dict[str, tuple[dict[Doc, float], float]] = {}
        self._by_name: dict[str, tuple[Doc, ...]] | None = None
        self._concepts: dict[str, tuple[dict[Doc, float], float]] = {}

    # -------------------------------------------------------------- building

    def updated(self, sources: Sequence[SegmentInput]) -> SearchIndex:
        """The next snapshot for `sources` (one per server), re-analysing only what changed."""
        segments = self._reuse(sources)
        df = dict(self.df)
        for server, old in self.segments.items():
            if segments.get(server) is not old:
                _count(df, old, -1)
        for server, new in segments.items():
            if self.segments.get(server) is not new:
                _count(df, new, +1)
        return SearchIndex(segments, analyzer=self.analyzer, weights=self.weights, df=df)

    def reweighted(self, weights: FieldWeights) -> SearchIndex:
        """The same tools, scored with other field weights."""
        return SearchIndex(self.segments, analyzer=self.analyzer, weights=weights, df=self.df)

    def _reuse(self, sources: Sequence[SegmentInput]) -> dict[str, Segment]:
        segments: dict[str, Segment] = {}
        with collection_paused():
            for source in sources:
                old = self.segments.get(source.server)
                segments[source.server] = (
                    old if old is not None and old.source == source else analyse(source, self.analyzer)
                )
        return segments

    # ------------------------------------------------------------- searching

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.total - df + 0.5) / (df + 0.5))

    def _postings(self, term: str) -> tuple[dict[Doc, float], float]:
        """Every doc that has `term` with its saturated frequency, and the largest of them."""
        scored = self._scored.get(term)
        if scored is None:
            weights = self.weights.as_tuple()
            entries: dict[Doc, float] = {}
            for segment in self.segments.values():
                for doc, counts in segment.postings.get(term, ()):
                    tf = 0.0
                    for field, count in enumerate(counts):
                        if count:
                            norm = 1.0 - _B[field] + _B[field] * doc.lengths[field] / self._average[field]
                            tf += weights[field] * count / norm
                    entries[doc] = tf / (_K1 + tf)
            scored = self._scored[term] = (entries, max(entries.values(), default=0.0))
        return scored

    def _concept(self, term: str) -> tuple[dict[Doc, float], float]:
        """What a query's `term` adds to each doc's score: idf x saturated frequency of
        the term itself or of one of its synonyms (times the synonym weight), whichever
        adds most, and the largest of them. A need counts once however many of its
        synonyms a tool uses (summed, "create a new board" preferred a tool that says
        create, new and add to one that is named create_board)."""
        found = self._concepts.get(term)
        if found is None:
            entries: dict[Doc, float] = {}
            for member, factor in self._members(term):
                weight = self.idf(member) * factor
                for doc, saturation in self._postings(member)[0].items():
                    value = weight * saturation
                    if value > entries.get(doc, 0.0):
                        entries[doc] = value
            found = self._concepts[term] = (entries, max(entries.values(), default=0.0))
        return found

    def _members(self, term: str) -> list[tuple[str, float]]:
        """The catalog's terms that answer a query's `term`, with their weight."""
        members = [(term, 1.0), *((other, SYNONYM_WEIGHT) for other in self.analyzer.synonyms(term))]
        return [(member, factor) for member, factor in members if member in self.df]

    def find(self, query: str, *, limit: int = 8, server: str | None = None) -> Found:
        """The tools that best answer `query`, best first (at most `limit`), each with the
        share of the query it matches."""
        ranked, unknown = self.ranked(query, limit=limit, server=server)
        cover = self.coverage(query, server)
        hits = tuple(Hit(doc=doc, score=score, coverage=cover(doc)) for doc, score in ranked)
        return Found(hits=hits, total=self.searched(server), unknown=unknown)

    def ranked(
        self, query: str, *, limit: int = 8, server: str | None = None
    ) -> tuple[list[tuple[Doc, float]], tuple[str, ...]]:
        """The best `limit` tools for `query` with their scores, best first, and the
        query's terms the catalog does not know at all. Tools scoring under
        `KEEP_SHARE` of the best are left out; a tool asked for by its name comes first.
        Each query term adds once, by itself or by its best synonym (`_concept`).

        Terms are taken the weightiest first (MaxScore, Turtle & Flood 1995): once the terms left
        cannot lift a tool that matched none so far into the best `limit`, they only add
        to the tools already found, so the long lists of common words are looked up, not
        walked.
        """
        wanted = max(limit, 1)
        # The name bonus re-ranks the best NAME_POOL: the walk below finds that many.
        limit = max(wanted, NAME_POOL) if NAME_BONUS else wanted
        asked = self._asked(query)
        unknown = tuple(term for term in asked if term not in self.df)
        concepts = {term: self._concept(term) for term in asked}
        known = sorted((term for term in concepts if concepts[term][0]), key=lambda term: -concepts[term][1])
        postings = [concepts[term] for term in known]
        idf = dict.fromkeys(known, 1.0)  # a concept's entries are its full contributions
        bounds = [idf[term] * top for term, (_entries, top) in zip(known, postings, strict=True)]
        rest = [sum(bounds[i:]) for i in range(len(bounds))]
        scores: dict[Doc, float] = {}
        segment = self.segments.get(server) if server is not None else None
        own = segment.docs if segment is not None else ()
        walked = 0
        # The limit-th best score only grows as terms add to the scores: a bound under
        # the last one worked out stops the walk without working it out again.
        floor = -1.0
        for i, (term, (entries, _top)) in enumerate(zip(known, postings, strict=True)):
            if len(scores) >= limit and rest[i] < floor:
                break
            if len(scores) >= limit and rest[i] < (floor := heapq.nlargest(limit, scores.values())[-1]):
                break
            term_idf = idf[term]
            if server is not None:
                # One server's tools: walk its own (often far fewer than the term's postings).
                for doc in own:
                    saturation = entries.get(doc)
                    if saturation is not None:
                        scores[doc] = scores.get(doc, 0.0) + term_idf * saturation
            elif not scores:  # the rarest term: a fresh table, built in one go
                scores = {doc: term_idf * saturation for doc, saturation in entries.items()}
            else:
                get = scores.get
                for doc, saturation in entries.items():
                    scores[doc] = get(doc, 0.0) + term_idf * saturation
            walked = i + 1
        for term, (entries, _top) in zip(known[walked:], postings[walked:], strict=True):
            term_idf = idf[term]
            for doc in scores:
                found = entries.get(doc)
                if found is not None:
                    scores[doc] += term_idf * found
        if NAME_BONUS and scores:
            named = self._named_weights(known)
            for doc, score in heapq.nlargest(limit, scores.items(), key=lambda item: item[1]):
                scores[doc] = score * (1.0 + NAME_BONUS * name_share(doc, named))
        limit = wanted
        exact = self.exact(query.strip(), server)
        if exact:  # a tool asked for by its name comes first (every server's, by its own name)
            top = max(scores.values(), default=0.0) + 1.0
            for doc in exact:
                scores[doc] = top
        # The best `limit` by score, ties by name: only the scores from the limit-th up
        # are sorted (a common word can put thousands of tools in `scores`).
        candidates = list(scores.items())
        if len(candidates) > limit:
            cut = heapq.nlargest(limit, scores.values())[-1]
            candidates = [item for item in candidates if item[1] >= cut]
        candidates.sort(key=lambda item: (-item[1], item[0].name))
        ranked: list[tuple[Doc, float]] = []
        for doc, score in candidates[:limit]:
            if ranked and score < KEEP_SHARE * ranked[0][1]:
                break
            ranked.append((doc, score))
        return ranked, unknown

    def _named_weights(self, known: Sequence[str]) -> dict[str, float]:
        """The catalog's terms a query of `known` terms asks for, each with its weight
        (1 for the term itself, the synonym weight for a synonym of one)."""
        weights: dict[str, float] = {}
        for term in known:
            for member, factor in self._members(term):
                weights[member] = max(weights.get(member, 0.0), factor)
        return weights

    def explain(self, query: str, doc: Doc) -> dict[str, Any]:
        """Why `doc` scores what it scores for `query`: each query term it matches (or
        matches through a synonym), the term's idf, how often it occurs in each field,
        and what it adds to the score; and whether the query named the tool exactly."""
        segment = self.segments.get(doc.server)
        matched: list[tuple[float, dict[str, Any]]] = []
        for asked in self._asked(query):
            best: tuple[float, str] | None = None
            for member, factor in self._members(asked):
                saturation = self._postings(member)[0].get(doc)
                if saturation is not None and (
                    best is None or self.idf(member) * factor * saturation > best[0]
                ):
                    best = (self.idf(member) * factor * saturation, member)
            if best is None or segment is None:
                continue
            adds, term = best
            counts = next(c for d, c in segment.postings[term] if d is doc)
            fields = {field: count for field, count in zip(FIELDS, counts, strict=True) if count}
            matched.append(
                (
                    adds,
                    {
                        "term": term,
                        "synonym_of": None if term == asked else asked,
                        "idf": round(self.idf(term), 3),
                        "fields": fields,
                        "adds": round(adds, 3),
                    },
                )
            )
        matched.sort(key=lambda item: -item[0])
        share = name_share(doc, self._named_weights([t for t in self._asked(query) if t in self.df]))
        return {
            "exact_name": doc in self.exact(query.strip(), None),
            "words_score": round(sum(adds for adds, _ in matched), 3),
            "name": {
                "terms": list(doc.named),
                "share": round(share, 3),
                "bonus": round(NAME_BONUS * share, 3),
            },
            "terms": [entry for _, entry in matched],
            "coverage": round(self.coverage(query)(doc), 3),
        }

    def searched(self, server: str | None) -> int:
        """How many tools a search (of one server's, or of all) looks at."""
        if server is None:
            return self.total
        return len(self.segments[server].docs) if server in self.segments else 0

    def coverage(self, query: str, server: str | None = None) -> Callable[[Doc], float]:
        """The share of the query's weight (idf) a tool matches, 0..1: each asked term by
        itself, or at the synonym weight through one of its synonyms; 1 for a tool asked
        for by its name. Words the catalog never uses (names, places, a repository's
        name) weigh half: a task sentence is full of them and still has its answer."""
        asked = self._asked(query)
        weight = sum(self.idf(term) * (1.0 if term in self.df else UNKNOWN_SHARE) for term in asked)
        exact = self.exact(query.strip(), server)

        def covered(doc: Doc) -> float:
            if doc in exact or not weight:
                return 1.0
            matched = 0.0
            for term in asked:
                if self._has(doc, term):
                    matched += self.idf(term)
                elif any(self._has(doc, other) for other in self.analyzer.synonyms(term)):
                    matched += SYNONYM_WEIGHT * self.idf(term)
            return min(1.0, matched / weight)

        return covered

    def _asked(self, query: str) -> list[str]:
        return list(dict.fromkeys(self.analyzer.terms(query, remember=False)))

    def _has(self, doc: Doc, term: str) -> bool:
        # Only terms of the catalog are scored (and kept): a query's other words are not.
        return term in self.df and doc in self._postings(term)[0]

    def docs(self) -> list[Doc]:
        """Every tool of the index, server by server."""
        return [doc for segment in self.segments.values() for doc in segment.docs]

    def exact(self, query: str, server: str | None) -> tuple[Doc, ...]:
        """The tool exposed as `query`, else every tool a server calls `query` itself."""
        if self._by_name is None:
            exposed: dict[str, tuple[Doc, ...]] = {}
            own: dict[str, tuple[Doc, ...]] = {}
            for segment in self.segments.values():
                for doc in segment.docs:
                    exposed[doc.name] = (doc,)
                    own[doc.tool] = (*own.get(doc.tool, ()), doc)
            self._by_name = {**own, **exposed}
        named = self._by_name.get(query, ())
        return tuple(doc for doc in named if server is None or doc.server == server)


def name_share(doc: Doc, asked: Mapping[str, float]) -> float:
    """The share of `doc`'s own name terms that a query asks for, 0..1 (`asked`: the
    terms it asks for, each with its weight; a term asked through a synonym counts at
    the synonym weight). 0 for a tool whose name is only its server's name."""
    if not doc.named:
        return 0.0
    return sum(asked.get(term, 0.0) for term in doc.named) / len(doc.named)


def _count(df: dict[str, int], segment: Segment, sign: int) -> None:
    for term, entries in segment.postings.items():
        count = df.get(term, 0) + sign * len(entries)
        if count > 0:
            df[term] = count
        else:
            df.pop(term, None)
