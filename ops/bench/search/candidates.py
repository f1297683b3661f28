"""Ranking candidates of the held-out steps work, tuned on the tuning part alone.

    .venv/bin/python ops/bench/search/candidates.py            # the tuning part, two folds
    .venv/bin/python ops/bench/search/candidates.py --heldout  # the held-out part, once

Each candidate is a setting of the search's knobs (text.py, index.py) or a re-ranking
tried here before it is built in. Without `--heldout` only the tuning part is read:
its units are cut into two folds at random (a recorded seed), and each candidate's
Recall@5 and MRR of steps and of whole tasks are printed for each fold and for both,
so a setting chosen on one fold can be checked on the other. With `--heldout` the
held-out part's figures of the chosen settings are printed (whole figures only, no
query by query), to be run once a choice is made, with how many held-out steps each
finds more and less often than the search as it is and the sign test's p (spread.py):
a gain of two or three steps of 79 is within chance. See docs/search-evaluation.md.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types

from assern.actors.router.catalog import BackendListing, Catalog, build_catalog, search_sources
from assern.actors.search import index as ix
from assern.actors.search import text as tx
from assern.actors.search.index import SearchIndex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import run  # noqa: E402
import spread  # noqa: E402
from labels import Query  # noqa: E402

FOLD_SEED = 2911

Setting = dict[str, Any]

#: name -> what it sets: the index's knobs ("NAME_BONUS": value, "_B": the length
#: normalisation per field) or a variant tried here ("analyzer", "lead", "name",
#: "feedback", "evidence", "proximity", "verbs", "cap", "in_name", "meaning", "delta",
#: "cooccur", "prefix"); "as it is"
#: is the search now
CANDIDATES: dict[str, Setting] = {
    "as it is": {},
    "before: no name bonus": {"NAME_BONUS": 0.0},
    "numbers dropped": {"NAME_BONUS": 0.0, "analyzer": {"numbers": True}},
    "irregular forms": {"NAME_BONUS": 0.0, "analyzer": {"irregular": True}},
    "related words": {"NAME_BONUS": 0.0, "analyzer": {"related": True}},
    "name bonus 0.25 (kept)": {"NAME_BONUS": 0.25},
    "name bonus 0.5": {"NAME_BONUS": 0.5},
    "name bonus 1.0": {"NAME_BONUS": 1.0},
    "name bonus 0.25 by idf": {"NAME_BONUS": 0.25, "name": "idf"},
    "name bonus 0.5 by idf": {"NAME_BONUS": 0.5, "name": "idf"},
    "name bonus 0.75 by idf": {"NAME_BONUS": 0.75, "name": "idf"},
    "name bonus 1.0 by idf": {"NAME_BONUS": 1.0, "name": "idf"},
    "name bonus 0.5 by idf, pool 10": {"NAME_BONUS": 0.5, "NAME_POOL": 10, "name": "idf"},
    "name bonus 0.25, short 4": {"NAME_BONUS": 0.25, "name": 4},
    "name bonus 0.5, short 4": {"NAME_BONUS": 0.5, "name": 4},
    "name bonus 0.5, short 3": {"NAME_BONUS": 0.5, "name": 3},
    "name bonus 0.25, related words": {"NAME_BONUS": 0.25, "analyzer": {"related": True}},
    "name bonus 0.25, related, irregular": {
        "NAME_BONUS": 0.25,
        "analyzer": {"related": True, "irregular": True},
    },
    "first sentence x2": {"NAME_BONUS": 0.0, "lead": 1},
    "first sentence x3": {"NAME_BONUS": 0.0, "lead": 2},
    "feedback 3 tools, 5 words, 0.3": {"NAME_BONUS": 0.0, "feedback": (3, 5, 0.3)},
    "feedback 3 tools, 10 words, 0.3": {"NAME_BONUS": 0.0, "feedback": (3, 10, 0.3)},
    "feedback 5 tools, 10 words, 0.5": {"NAME_BONUS": 0.0, "feedback": (5, 10, 0.5)},
    "feedback 1 tool, 5 words, 0.3": {"NAME_BONUS": 0.0, "feedback": (1, 5, 0.3)},
    "feedback 1 tool, 5 words, 0.15": {"NAME_BONUS": 0.0, "feedback": (1, 5, 0.15)},
    "evidence 0.5": {"NAME_BONUS": 0.0, "evidence": 0.5},
    "enum values": {"enums": True},
    "enum values, no name bonus": {"NAME_BONUS": 0.0, "enums": True},
    "porter stemmer": {"analyzer": {"stemmer": "porter"}},
    "synonym weight 0.3": {"SYNONYM_WEIGHT": 0.3},
    "synonym weight 0.7": {"SYNONYM_WEIGHT": 0.7},
    "name bonus 0.25, evidence 0.7": {"NAME_BONUS": 0.25, "evidence": 0.7},
    "name bonus 0.25, evidence 0.5": {"NAME_BONUS": 0.25, "evidence": 0.5},
    # the third round (issue 44): each on top of the search as it is
    "proximity tp 0.1": {"proximity": ("tp", 0.1)},
    "proximity tp 0.25": {"proximity": ("tp", 0.25)},
    "proximity tp 0.5": {"proximity": ("tp", 0.5)},
    "proximity span 0.1": {"proximity": ("span", 0.1)},
    "proximity span 0.25": {"proximity": ("span", 0.25)},
    "proximity span 0.5": {"proximity": ("span", 0.5)},
    "verb-object 0.1": {"verbs": (0.1, 0.0, "groups")},
    "verb-object 0.25": {"verbs": (0.25, 0.0, "groups")},
    "verb contradicted x0.8": {"verbs": (0.0, 0.2, "groups")},
    "verb contradicted x0.6": {"verbs": (0.0, 0.4, "groups")},
    "verb contradicted x0.8, read/write": {"verbs": (0.0, 0.2, "classes")},
    "verb-object 0.25, contradicted x0.8": {"verbs": (0.25, 0.2, "groups")},
    "b description 0.9": {"_B": (0.3, 0.9, 0.75, 0.0, 0.0)},
    "b description 1.0": {"_B": (0.3, 1.0, 0.75, 0.0, 0.0)},
    "b name 0.5": {"_B": (0.5, 0.75, 0.75, 0.0, 0.0)},
    "b name 0.0": {"_B": (0.0, 0.75, 0.75, 0.0, 0.0)},
    "b name 0.5, description 0.9": {"_B": (0.5, 0.9, 0.75, 0.0, 0.0)},
    "b name 0.5, description 1.0": {"_B": (0.5, 1.0, 0.75, 0.0, 0.0)},
    "b description 0.5": {"_B": (0.3, 0.5, 0.75, 0.0, 0.0)},
    "b parameters 0.9": {"_B": (0.3, 0.75, 0.9, 0.0, 0.0)},
    "description tf once": {"cap": (1,)},
    "description, parameters tf once": {"cap": (1, 2)},
    "every field tf once": {"cap": (0, 1, 2, 3, 4)},
    "parameters tf once": {"cap": (2,)},
    "parameters tf once, b description 0.9": {"cap": (2,), "_B": (0.3, 0.9, 0.75, 0.0, 0.0)},
    "description, parameters tf once, b description 0.9": {"cap": (1, 2), "_B": (0.3, 0.9, 0.75, 0.0, 0.0)},
    "fused (rank fusion, before the blend)": {"meaning": "fused"},
    "meaning x(1 + 0.1 cos)": {"meaning": 0.1},
    "meaning x(1 + 0.2 cos)": {"meaning": 0.2},
    "meaning x(1 + 0.3 cos)": {"meaning": 0.3},
    "meaning x(1 + 0.5 cos)": {"meaning": 0.5},
    "meaning x(1 + 1.0 cos)": {"meaning": 1.0},
    "meaning when words cover < 0.25": {"meaning": ("fallback", 0.25)},
    "meaning when words cover < 0.5": {"meaning": ("fallback", 0.5)},
    "meaning when words cover < 0.67": {"meaning": ("fallback", 0.67)},
    "meaning when words cover < 0.8": {"meaning": ("fallback", 0.8)},
    "meaning when words cover < 1.0": {"meaning": ("fallback", 1.0)},
    "tf once: meaning x(1 + 0.3 cos)": {"cap": (1, 2), "meaning": 0.3},
    "tf once: verb contradicted x0.8": {"cap": (1, 2), "verbs": (0.0, 0.2, "groups")},
    "tf once: proximity span 0.25": {"cap": (1, 2), "proximity": ("span", 0.25)},
    "tf once: proximity tp 0.1": {"cap": (1, 2), "proximity": ("tp", 0.1)},
    "name pool 40": {"NAME_POOL": 40},
    # the fourth round, on the enlarged sets: a server the query names
    "server named 0.25": {"server_named": (0.25, "first", 10)},
    "server named 0.5": {"server_named": (0.5, "first", 10)},
    "server named 1.0": {"server_named": (1.0, "first", 10)},
    "server named 2.0": {"server_named": (2.0, "first", 10)},
    "server named 0.5, all terms": {"server_named": (0.5, "all", 10)},
    "server named 1.0, all terms": {"server_named": (1.0, "all", 10)},
    "server named 0.0 (pool only)": {"server_named": (0.0, "first", 10)},
    # the fifth round: which tools the words find (the ceilings, ceiling.py)
    "server score 0.25": {"servers": 0.25},
    "server score 0.5": {"servers": 0.5},
    "server score 1.0": {"servers": 1.0},
    "task split 0.3": {"split": 0.3},
    "task split 0.5": {"split": 0.5},
    "word vectors 3 >= 0.5 at 0.2": {"vectors": (3, 0.5, 0.2)},
    "word vectors 3 >= 0.5 at 0.4": {"vectors": (3, 0.5, 0.4)},
    "word vectors 3 >= 0.6 at 0.2": {"vectors": (3, 0.6, 0.2)},
    "same first 5 letters 0.5": {"prefix": (5, 0.5)},
    "same first 6 letters 0.5": {"prefix": (6, 0.5)},
    "same first 5 letters 0.3": {"prefix": (5, 0.3)},
    "same first 6 letters 0.3": {"prefix": (6, 0.3)},
    "bm25+ delta 0.1": {"delta": 0.1},
    "bm25+ delta 0.25": {"delta": 0.25},
    "co-occurring words 0.2, cos 0.3": {"cooccur": (0.2, 0.3, 3)},
    "co-occurring words 0.3, cos 0.2": {"cooccur": (0.3, 0.2, 3)},
    "co-occurring words 0.5, cos 0.3": {"cooccur": (0.5, 0.3, 3)},
    "query in name 0.25": {"in_name": 0.25},
    "query in name 0.5": {"in_name": 0.5},
}

#: groups of words that ask for related things in general English (what a user says
#: against what a tool's author wrote), beside text.SYNONYMS; written before they were
#: tried, not from the labelled queries
RELATED = (
    "distance far near route direction directions travel",
    "location place address coordinates geocode position",
    "orientation rotate landscape portrait",
    "upload put attach",
    "remember memorize record store save",
    "forget delete",
    "mute silence snooze",
    "metric metrics measurement usage statistics stats",
    "status state transition progress",
    "close resolve finish complete done",
    "rename move",
    "schedule plan book",
    "notify alert notification remind reminder",
    "comment reply note annotate",
    "copy duplicate clone",
    "start launch open begin",
    "stop end terminate kill halt",
    "link connect relate relation associate",
    "format style highlight color colour",
    "freeze pin lock",
    "summary summarize digest overview",
    "chart graph plot diagram visualize",
    "table spreadsheet sheet",
    "error exception failure crash",
    "price cost pay payment billing invoice",
    "sort order rank",
    "translate convert transform",
    "compare diff difference",
    "undo revert rollback restore",
    "merge combine join",
    "login authenticate signin auth",
    "deploy release ship",
    "hotel lodging accommodation stay rental",
    "weather forecast temperature",
    "news article headline",
    "video clip movie",
    "song music track audio",
    "install setup",
    "read load",
    "count number total",
)

#: irregular forms of English verbs and nouns, to their base form before stemming (the
#: Snowball stemmer strips suffixes only: "frozen" does not meet "freeze")
IRREGULAR = {
    form: base
    for base, forms in (
        ("arise", "arose arisen"), ("begin", "began begun"), ("bind", "bound"),
        ("break", "broke broken"), ("bring", "brought"), ("build", "built"), ("buy", "bought"),
        ("catch", "caught"), ("choose", "chose chosen"), ("come", "came"), ("draw", "drew drawn"),
        ("drive", "drove driven"), ("eat", "ate eaten"), ("fall", "fell fallen"), ("feed", "fed"),
        ("feel", "felt"), ("fight", "fought"), ("find", "found"), ("fly", "flew flown"),
        ("forget", "forgot forgotten"), ("freeze", "froze frozen"), ("get", "got gotten"),
        ("give", "gave given"), ("go", "went gone"), ("grow", "grew grown"), ("hang", "hung"),
        ("hide", "hid hidden"), ("hold", "held"), ("keep", "kept"), ("know", "knew known"),
        ("lay", "laid"), ("lead", "led"), ("leave", "left"), ("lend", "lent"), ("lose", "lost"),
        ("make", "made"), ("mean", "meant"), ("meet", "met"), ("pay", "paid"),
        ("ride", "rode ridden"), ("ring", "rang rung"), ("rise", "rose risen"), ("run", "ran"),
        ("say", "said"), ("see", "saw seen"), ("seek", "sought"), ("sell", "sold"),
        ("send", "sent"), ("shake", "shook shaken"), ("shoot", "shot"), ("show", "shown"),
        ("shrink", "shrank shrunk"), ("sing", "sang sung"), ("sit", "sat"), ("sleep", "slept"),
        ("speak", "spoke spoken"), ("spend", "spent"), ("stand", "stood"),
        ("steal", "stole stolen"), ("stick", "stuck"), ("strike", "struck"), ("swim", "swam swum"),
        ("take", "took taken"), ("teach", "taught"), ("tear", "tore torn"), ("tell", "told"),
        ("think", "thought"), ("throw", "threw thrown"), ("understand", "understood"),
        ("wake", "woke woken"), ("wear", "wore worn"), ("win", "won"), ("write", "wrote written"),
        ("child", "children"), ("person", "people"), ("man", "men"), ("woman", "women"),
        ("foot", "feet"), ("tooth", "teeth"), ("mouse", "mice"), ("datum", "data"),
        ("index", "indices"), ("matrix", "matrices"), ("vertex", "vertices"),
        ("analysis", "analyses"), ("criterion", "criteria"), ("medium", "media"),
    )
    for form in forms.split()
}  # fmt: skip


class TriedAnalyzer(tx.Analyzer):
    """The analyzer with words of digits left out, irregular forms to their base, or
    `RELATED` beside the synonyms."""

    def __init__(
        self, *, numbers: bool = False, irregular: bool = False, related: bool = False, stemmer: str = ""
    ) -> None:
        super().__init__()
        self.numbers, self.irregular, self.related = numbers, irregular, related
        if stemmer:
            import snowballstemmer

            self._stemmer = snowballstemmer.stemmer(stemmer)

    def term(self, word: str, *, remember: bool = True) -> str:
        if self.numbers and word.isdigit():
            return ""
        return super().term(IRREGULAR.get(word, word) if self.irregular else word, remember=remember)

    def terms(self, text: str, *, remember: bool = True) -> list[str]:
        found = []
        for word in tx.words(text):
            term = self.term(word, remember=remember)
            if term:
                found.append(term)
        return found

    def synonyms(self, term: str) -> tuple[str, ...]:
        if self._groups is None:
            groups: dict[str, tuple[str, ...]] = {}
            for group in tx.SYNONYMS + (RELATED if self.related else ()):
                stems = tuple(
                    dict.fromkeys(self.term(word, remember=False) or word for word in group.split())
                )
                for stem in stems:
                    others = (*groups.get(stem, ()), *(other for other in stems if other != stem))
                    groups[stem] = tuple(dict.fromkeys(others))
            self._groups = groups
        return self._groups.get(term, ())


def lead_repeated(found: Sequence[BackendListing], times: int) -> list[BackendListing]:
    """The listings with each description's first sentence `times` more times."""

    def more(tool: types.Tool) -> types.Tool:
        text = tool.description or ""
        first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
        return tool.model_copy(update={"description": " ".join([text, *[first] * times])})

    return [attrs.evolve(listing, tools=tuple(more(tool) for tool in listing.tools)) for listing in found]


def with_enums(found: Sequence[BackendListing]) -> list[BackendListing]:
    """The listings with each parameter's enum values (its items' too) added to its
    description, where the index reads parameters."""

    def more(tool: types.Tool) -> types.Tool:
        schema = dict(tool.input_schema or {})
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return tool
        changed = {}
        for name, spec in properties.items():
            if not isinstance(spec, Mapping):
                changed[name] = spec
                continue
            items = spec.get("items")
            values = [*spec.get("enum", ()), *(items.get("enum", ()) if isinstance(items, Mapping) else ())]
            words = " ".join(str(value) for value in values)
            text = str(spec.get("description", ""))
            changed[name] = {**spec, "description": f"{text} {words}".strip()} if words else spec
        return tool.model_copy(update={"input_schema": {**schema, "properties": changed}})

    return [attrs.evolve(listing, tools=tuple(more(tool) for tool in listing.tools)) for listing in found]


def catalog_for(found: Sequence[BackendListing], setting: Setting) -> Catalog:
    listed = lead_repeated(found, setting["lead"]) if "lead" in setting else list(found)
    if setting.get("enums"):
        listed = with_enums(listed)
    catalog = build_catalog(listed, exposure="search")
    analyzer = TriedAnalyzer(**setting.get("analyzer", {}))
    index = SearchIndex(analyzer=analyzer).updated(search_sources(listed, catalog))
    return attrs.evolve(catalog, search=index)


@contextlib.contextmanager
def knobs(setting: Setting) -> Iterator[None]:
    """The index's module constants (NAME_BONUS, NAME_POOL, SYNONYM_WEIGHT) set for a while."""
    kept = {key: getattr(ix, key) for key in setting if key.isupper()}
    try:
        for key in kept:
            setattr(ix, key, setting[key])
        yield
    finally:
        for key, value in kept.items():
            setattr(ix, key, value)


def named_by_idf(index: SearchIndex) -> Callable[[ix.Doc, Mapping[str, float]], float]:
    """The share of a name asked for, each of its terms counting by its idf."""

    def share(doc: ix.Doc, asked: Mapping[str, float]) -> float:
        weights = [index.idf(term) for term in doc.named]
        total = sum(weights)
        return (
            sum(asked.get(t, 0.0) * w for t, w in zip(doc.named, weights, strict=True)) / total
            if total
            else 0.0
        )

    return share


def short_named(index: SearchIndex, terms: int) -> run.Ranker:
    """The name bonus smaller in proportion for a query of more than `terms` terms."""
    bonus = ix.NAME_BONUS

    def rank(query: str) -> list[str]:
        known = [term for term in index._asked(query) if term in index.df]
        ix.NAME_BONUS = bonus * min(1.0, terms / len(known)) if known else bonus
        try:
            return [hit.doc.name for hit in index.find(query, limit=10).hits]
        finally:
            ix.NAME_BONUS = bonus

    return rank


@contextlib.contextmanager
def replaced(module: Any, name: str, value: Any) -> Iterator[None]:
    """`module.name` is `value` for a while."""
    kept = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, kept)


def feedback(index: SearchIndex, tools: int, count: int, weight: float) -> run.Ranker:
    """Pseudo-relevance feedback: the best `tools` tools' name and description terms
    (by tf x idf, each tool's share by its score) added to the query at `weight`; the
    best 20 by words re-ranked."""
    terms: dict[ix.Doc, dict[str, int]] = {}

    def doc_terms(doc: ix.Doc) -> dict[str, int]:
        found = terms.get(doc)
        if found is None:
            description = (doc.definition.description or "") if doc.definition else ""
            found = terms[doc] = {}
            for term in index.analyzer.terms(doc.tool) + index.analyzer.terms(description):
                found[term] = found.get(term, 0) + 1
        return found

    def rank(query: str) -> list[str]:
        first, _ = index.ranked(query, limit=20)
        if not first:
            return []
        asked = set(index._asked(query))
        best = first[0][1]
        pool: dict[str, float] = {}
        for doc, score in first[:tools]:
            for term, tf in doc_terms(doc).items():
                if term not in asked and term in index.df:
                    pool[term] = pool.get(term, 0.0) + score / best * tf * index.idf(term)
        extra = sorted(pool, key=lambda term: -pool[term])[:count]
        scored = []
        for doc, score in first:
            added = sum(index._concept(term)[0].get(doc, 0.0) for term in extra)
            scored.append((score + weight * added, doc.name))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [name for _, name in scored[:10]]

    return rank


def evidenced(index: SearchIndex, factor: float) -> run.Ranker:
    """Each of the best 20 tools that matches no query term (nor a synonym of one) in its
    name or description, only in its parameters, server name or instructions, has its
    score times `factor`."""
    fields: dict[tuple[str, ix.Doc], bool] = {}

    def said(doc: ix.Doc, term: str) -> bool:
        key = (term, doc)
        if key not in fields:
            segment = index.segments[doc.server]
            counts = next((c for d, c in segment.postings.get(term, ()) if d is doc), None)
            fields[key] = counts is not None and bool(counts[0] or counts[1])
        return fields[key]

    def rank(query: str) -> list[str]:
        first, _ = index.ranked(query, limit=20)
        asked = [t for t in index._asked(query) if t in index.df]
        members = [m for t in asked for m, _f in index._members(t)]
        scored = []
        for doc, score in first:
            if not any(said(doc, m) for m in members):
                score *= factor
            scored.append((score, doc.name))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [name for _, name in scored[:10]]

    return rank


def reranked(
    index: SearchIndex, factor: Callable[[str, list[tuple[ix.Doc, float]]], list[float]]
) -> run.Ranker:
    """The best 20 by words (as the search ranks them now) re-ranked by `factor`: the
    new score of each, given the query and the 20."""

    def rank(query: str) -> list[str]:
        first, _ = index.ranked(query, limit=20)
        scored = sorted(
            ((score, doc.name) for (doc, _), score in zip(first, factor(query, first), strict=True)),
            key=lambda item: (-item[0], item[1]),
        )
        return [name for _, name in scored[:10]]

    return rank


class Sequences:
    """Each tool's name and description as term sequences (positions kept), and a
    query's terms as concepts (each with the catalog terms that answer it)."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self._docs: dict[ix.Doc, tuple[list[str], list[str]]] = {}

    def of(self, doc: ix.Doc) -> tuple[list[str], list[str]]:
        found = self._docs.get(doc)
        if found is None:
            tool = doc.definition
            text = f"{tool.description or ''} {tool.title or ''}" if tool is not None else ""
            terms = self.index.analyzer.terms
            found = self._docs[doc] = (terms(doc.tool), terms(text))
        return found

    def concepts(self, query: str) -> tuple[list[str], dict[str, int]]:
        """The query's known terms in order, and each catalog term that answers one of
        them -> the index of the first it answers."""
        asked = [term for term in self.index._asked(query) if term in self.index.df]
        members: dict[str, int] = {}
        for i, term in enumerate(asked):
            for member, _factor in self.index._members(term):
                members.setdefault(member, i)
        return asked, members


def proximity(index: SearchIndex, mode: str, weight: float, window: int = 5) -> run.Ranker:
    """A bonus for query words near each other in a tool's name or description.

    "tp": BM25TP (Rasolofo & Savoy 2003): each pair of occurrences of two different
    query words at most `window` apart adds 1/d^2 to the pair's weight; the score gets
    `weight` x the sum over pairs of min(idf) x acc / (1 + acc). "span": the score times
    1 + `weight` x the share of the query's neighbouring word pairs found within 3 words
    of each other in the name or the description."""
    seqs = Sequences(index)

    def factor(query: str, first: list[tuple[ix.Doc, float]]) -> list[float]:
        asked, members = seqs.concepts(query)
        idf = [index.idf(term) for term in asked]
        scores = []
        for doc, score in first:
            placed = [[(p, members[t]) for p, t in enumerate(seq) if t in members] for seq in seqs.of(doc)]
            if mode == "tp":
                acc: dict[tuple[int, int], float] = {}
                for positions in placed:
                    for a, (p, ci) in enumerate(positions):
                        for q, cj in positions[a + 1 :]:
                            if q - p > window:
                                break
                            if ci != cj:
                                key = (min(ci, cj), max(ci, cj))
                                acc[key] = acc.get(key, 0.0) + 1.0 / (q - p) ** 2
                bonus = sum(min(idf[i], idf[j]) * v / (1.0 + v) for (i, j), v in acc.items())
                scores.append(score + weight * bonus)
            else:
                pairs = [(i, i + 1) for i in range(len(asked) - 1)]
                near = 0
                for i, j in pairs:
                    if any(
                        ci == i and cj == j and abs(q - p) <= 3
                        for positions in placed
                        for p, ci in positions
                        for q, cj in positions
                    ):
                        near += 1
                share = near / len(pairs) if pairs else 0.0
                scores.append(score * (1.0 + weight * share))
        return scores

    return reranked(index, factor)


#: common action verbs of tool names and requests (as words; stemmed when used)
ACTION_VERBS = """
    get list create delete remove send update search find fetch read write add post run
    execute start stop open close set move copy upload download share schedule show view
    make edit modify change retrieve lookup query publish erase destroy describe insert
    append cancel reply comment archive merge invite assign rename export import generate
    check analyze summarize navigate click fill take capture save store install deploy
    """.split()  # noqa: SIM905
#: the verbs that only read (the "read/write" variant: a reading verb contradicts any other)
READING_VERBS = """
    get list search find fetch read show view retrieve lookup query describe check export
    download
    """.split()  # noqa: SIM905


def verb_object(index: SearchIndex, weight: float, penalty: float, contradiction: str) -> run.Ranker:
    """A query's first action verb and the word after it (its object) count `weight` more
    when they are among the tool's name's terms (score x (1 + weight x share of the two
    matched, a synonym at the synonym weight)); a tool whose name's first action verb
    contradicts the query's has its score times 1 - `penalty`. "groups": another verb
    not of the query verb's synonym group contradicts it; "classes": a reading verb and a
    verb that does not only read contradict each other."""
    term = index.analyzer.term
    verbs = {term(word, remember=False) for word in ACTION_VERBS}
    reading = {term(word, remember=False) for word in READING_VERBS}
    for word in list(reading):
        reading.update(index.analyzer.synonyms(word))

    def contradicts(asked: str, named: str) -> bool:
        if contradiction == "classes":
            return (asked in reading) != (named in reading)
        return named != asked and named not in index.analyzer.synonyms(asked)

    def factor(query: str, first: list[tuple[ix.Doc, float]]) -> list[float]:
        asked = [t for t in index._asked(query) if t in index.df]
        at = next((i for i, t in enumerate(asked) if t in verbs), None)
        if at is None:
            return [score for _, score in first]
        verb = asked[at]
        obj = next((t for t in asked[at + 1 :] if t not in verbs), None)
        scores = []
        for doc, score in first:
            matched = 0.0
            for wanted in (verb, obj):
                if wanted is None:
                    continue
                if wanted in doc.named:
                    matched += 1.0
                elif any(other in doc.named for other in index.analyzer.synonyms(wanted)):
                    matched += tx.SYNONYM_WEIGHT
            score *= 1.0 + weight * matched / 2.0
            own = next((t for t in doc.named if t in verbs), None)
            if penalty and own is not None and contradicts(verb, own):
                score *= 1.0 - penalty
            scores.append(score)
        return scores

    return reranked(index, factor)


def capped(index: SearchIndex, fields: Sequence[int]) -> SearchIndex:
    """The same index with a term counted at most once in each of `fields`."""
    segments = {}
    for server, segment in index.segments.items():
        postings = {
            term: tuple(
                (doc, tuple(min(c, 1) if f in fields else c for f, c in enumerate(counts)))
                for doc, counts in entries
            )
            for term, entries in segment.postings.items()
        }
        segments[server] = attrs.evolve(segment, postings=postings)
    return SearchIndex(segments, analyzer=index.analyzer, weights=index.weights, df=index.df)


class PlusIndex(SearchIndex):
    """BM25+ (Lv & Zhai 2011): each term a tool has adds `delta` more to its saturated
    frequency, so a long text's match is never worth next to nothing."""

    delta = 0.0

    def _postings(self, term: str) -> tuple[dict[ix.Doc, float], float]:
        scored = self._scored.get(term)
        if scored is None:
            entries, _top = super()._postings(term)
            entries = {doc: value + self.delta for doc, value in entries.items()}
            scored = self._scored[term] = (entries, max(entries.values(), default=0.0))
        return scored


class PrefixIndex(SearchIndex):
    """A query term also answered, at `factor`, by the catalog's terms that begin with
    the same `length` letters (both at least that long): derivations the suffix
    stemmer leaves apart (analysi/analyz, summari/summar, notif/notifi)."""

    length = 5
    factor = 0.5
    _prefixed: dict[str, tuple[str, ...]] | None = None

    def _members(self, term: str) -> list[tuple[str, float]]:
        members = super()._members(term)
        if len(term) < self.length:
            return members
        if self._prefixed is None:
            table: dict[str, list[str]] = {}
            for known in self.df:
                if len(known) >= self.length:
                    table.setdefault(known[: self.length], []).append(known)
            self._prefixed = {key: tuple(sorted(terms)) for key, terms in table.items()}
        have = {member for member, _ in members}
        return members + [
            (other, self.factor) for other in self._prefixed.get(term[: self.length], ()) if other not in have
        ]


def prefixed(index: SearchIndex, length: int, factor: float) -> SearchIndex:
    made = PrefixIndex(index.segments, analyzer=index.analyzer, weights=index.weights, df=index.df)
    made.length, made.factor = length, factor
    return made


def plus(index: SearchIndex, delta: float) -> SearchIndex:
    made = PlusIndex(index.segments, analyzer=index.analyzer, weights=index.weights, df=index.df)
    made.delta = delta
    return made


def cooccurring(index: SearchIndex, weight: float, floor: float, most: int) -> run.Ranker:
    """Global expansion by co-occurrence in the catalog itself (a similarity thesaurus,
    Qiu & Frei 1993): two terms are related by the cosine of the sets of tools whose
    name or description has them; each query term brings its `most` most related terms
    over `floor`, each adding `weight` x cosine x what it adds to a tool; the best 50 by
    words and the tools the added terms find are ranked together."""
    seqs = Sequences(index)
    having: dict[str, set[ix.Doc]] = {}
    for doc in index.docs():
        name, description = seqs.of(doc)
        for term in {*name, *description}:
            having.setdefault(term, set()).add(doc)
    related: dict[str, list[tuple[str, float]]] = {}

    def neighbours(term: str) -> list[tuple[str, float]]:
        found = related.get(term)
        if found is None:
            mine = having.get(term, set())
            counts: dict[str, int] = {}
            for doc in mine:
                name, description = seqs.of(doc)
                for other in {*name, *description}:
                    if other != term:
                        counts[other] = counts.get(other, 0) + 1
            scored = [
                (other, n / (len(mine) * len(having[other])) ** 0.5) for other, n in counts.items() if n >= 2
            ]
            scored = [item for item in scored if item[1] >= floor]
            found = related[term] = sorted(scored, key=lambda item: (-item[1], item[0]))[:most]
        return found

    def rank(query: str) -> list[str]:
        first, _ = index.ranked(query, limit=50)
        scores = dict(first)
        asked = [t for t in index._asked(query) if t in index.df]
        for term in asked:
            for other, cos in neighbours(term):
                if other in asked:
                    continue
                for doc, value in index._concept(other)[0].items():
                    scores[doc] = scores.get(doc, 0.0) + weight * cos * value
        ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0].name))
        return [doc.name for doc, _ in ordered[:10]]

    return rank


_SEMANTIC: dict[int, Any] = {}


def meaning(index: SearchIndex, catalog: Catalog, blend: float | str | tuple[str, float]) -> run.Ranker:
    """With the `assern[semantic]` extra: "fused" is the rank fusion the search used
    before the blend (run.py); a number w re-orders the best 20 by words by score x
    (1 + w x cosine similarity), as the search now does at `semantic.MEANING_WEIGHT`."""

    semantic = _SEMANTIC.get(id(catalog))
    if semantic is None:
        semantic = _SEMANTIC[id(catalog)] = run.semantic_for(catalog)
    assert semantic is not None, "main() runs the meaning candidates only with the extra"
    if blend == "fused":
        return run.fused_ranker(index, semantic)
    if isinstance(blend, tuple):  # ("fallback", c): fused only when the words' best covers < c
        least = blend[1]

        fused = run.fused_ranker(index, semantic)

        def fallback(query: str) -> list[str]:
            words = index.find(query, limit=10)
            if words.hits and words.hits[0].coverage >= least:
                return [h.doc.name for h in words.hits]
            return fused(query)

        return fallback
    docs, matrix, _servers = semantic._aligned(index)
    rows = {doc: i for i, doc in enumerate(docs)}
    assert isinstance(blend, float)

    def factor(query: str, first: list[tuple[ix.Doc, float]]) -> list[float]:
        wanted = semantic.embedder.embed([query])[0]
        scores = []
        for doc, score in first:
            row = rows.get(doc)
            cos = float(matrix[row] @ wanted) if row is not None else 0.0
            scores.append(score * (1.0 + blend * cos))
        return scores

    return reranked(index, factor)


def query_in_name(index: SearchIndex, weight: float) -> run.Ranker:
    """The score times 1 + `weight` x the share of the query's weight (idf; a synonym at
    the synonym weight) that the tool's own name's terms answer: the name bonus seen from
    the query's side (a name of one rare word the query asks for covers it most)."""

    def factor(query: str, first: list[tuple[ix.Doc, float]]) -> list[float]:
        asked = [t for t in index._asked(query) if t in index.df]
        total = sum(index.idf(t) for t in asked)
        scores = []
        for doc, score in first:
            named = set(doc.named)
            got = 0.0
            for term in asked:
                best = max((f for m, f in index._members(term) if m in named), default=0.0)
                got += best * index.idf(term)
            scores.append(score * (1.0 + weight * (got / total if total else 0.0)))
        return scores

    return reranked(index, factor)


def named_servers(index: SearchIndex, query: str, rule: str) -> set[str]:
    """The servers a query names: by the first term of a server's name, or all of its
    terms ("first"); by all of them only ("all")."""
    asked = set(index._asked(query))
    named = set()
    for server in index.segments:
        terms = index.analyzer.terms(server)
        if not terms:
            continue
        if set(terms) <= asked or (rule == "first" and terms[0] in asked):
            named.add(server)
    return named


def server_named(index: SearchIndex, weight: float, rule: str, own: int) -> run.Ranker:
    """A query that names a server (tasks often name the service, not the operation):
    the best 20 by words and the named servers' own best `own`, each named server's
    tool's score times 1 + `weight`."""

    def rank(query: str) -> list[str]:
        first, _ = index.ranked(query, limit=20)
        named = named_servers(index, query, rule)
        pool = dict(first)
        for server in named:
            for doc, score in index.ranked(query, limit=own, server=server)[0]:
                pool.setdefault(doc, score)
        scored = sorted(
            (
                (score * (1.0 + weight) if doc.server in named else score, doc.name)
                for doc, score in pool.items()
            ),
            key=lambda item: (-item[0], item[1]),
        )
        return [name for _, name in scored[:10]]

    return rank


def server_scored(index: SearchIndex, weight: float) -> run.Ranker:
    """Servers ranked as well as tools: each server one document (its tools' names and
    descriptions, its name and instructions) ranked by BM25 (k1 1.2, b 0.75, each query
    term by itself or its best synonym); each of the best 20 tools by words has its score
    times 1 + `weight` x its server's score over the best server's."""
    counts: dict[str, dict[str, int]] = {}
    for server, segment in index.segments.items():
        terms: dict[str, int] = {}
        for term, entries in segment.postings.items():
            total = sum(counts_[0] + counts_[1] for _doc, counts_ in entries)
            total += entries[0][1][3] + entries[0][1][4]  # the server's name, its instructions
            if total:
                terms[term] = total
        counts[server] = terms
    lengths = {server: sum(terms.values()) for server, terms in counts.items()}
    average = sum(lengths.values()) / max(len(lengths), 1)
    df: dict[str, int] = {}
    for terms in counts.values():
        for term in terms:
            df[term] = df.get(term, 0) + 1

    def idf(term: str) -> float:
        return math.log(1 + (len(counts) - df[term] + 0.5) / (df[term] + 0.5))

    def servers(query: str) -> dict[str, float]:
        scores: dict[str, float] = {}
        for asked in index._asked(query):
            members = index._members(asked) if asked in index.df else []
            for server, terms in counts.items():
                norm = 1.2 * (0.25 + 0.75 * lengths[server] / average)
                best = max(
                    (f * idf(m) * terms[m] * 2.2 / (terms[m] + norm) for m, f in members if m in terms),
                    default=0.0,
                )
                if best:
                    scores[server] = scores.get(server, 0.0) + best
        return scores

    def factor(query: str, first: list[tuple[ix.Doc, float]]) -> list[float]:
        scores = servers(query)
        top = max(scores.values(), default=0.0) or 1.0
        return [score * (1.0 + weight * scores.get(doc.server, 0.0) / top) for doc, score in first]

    return reranked(index, factor)


#: where a task sentence is cut into its needs: punctuation and the words that join steps
CLAUSE = re.compile(r"[,;:.!?()]|\b(?:and|then|also|after that|before|plus)\b", re.IGNORECASE)


def split_task(index: SearchIndex, weight: float, k: int = 5) -> run.Ranker:
    """A query of several clauses (cut at `CLAUSE`) searched whole and clause by clause,
    the lists fused by reciprocal rank (k `k`): the whole sentence's at 1, each clause's
    at `weight`; a query of one clause as it is."""

    def rank(query: str) -> list[str]:
        whole = [hit.doc.name for hit in index.find(query, limit=20).hits]
        parts = [part.strip() for part in CLAUSE.split(query) if part and index._asked(part.strip())]
        if len(parts) < 2:
            return whole[:10]
        scores: dict[str, float] = {}
        lists = [(1.0, whole)] + [(weight, [h.doc.name for h in index.find(p, limit=10).hits]) for p in parts]
        for share, names in lists:
            for place, name in enumerate(names, start=1):
                scores[name] = scores.get(name, 0.0) + share / (k + place)
        return sorted(scores, key=lambda name: (-scores[name], name))[:10]

    return rank


def vector_expanded(index: SearchIndex, most: int, floor: float, weight: float) -> run.Ranker:
    """With the extra: each query word also asks for the `most` catalog words nearest it
    by WordLlama's vectors (cosine at least `floor`; a word of another stem), each adding
    `weight` x cosine of its score, over every tool (it may bring in tools the words
    alone do not find)."""
    import numpy as np

    from assern.actors.search import semantic as sem

    vocabulary: dict[str, str] = {}
    for doc in index.docs():
        text = doc.tool + " " + ((doc.definition.description or "") if doc.definition else "")
        for word in tx.words(text):
            if word.isalpha() and len(word) > 2 and word not in tx.STOP_WORDS:
                term = index.analyzer.term(word, remember=False)
                if term and term in index.df:
                    vocabulary.setdefault(word, term)
    words = sorted(vocabulary)
    embedder = sem.Embedder()
    matrix = embedder.embed(words)
    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    near: dict[str, list[tuple[str, float]]] = {}

    def neighbours(word: str) -> list[tuple[str, float]]:
        found = near.get(word)
        if found is None:
            vector = embedder.embed([word])[0]
            similarity = matrix @ (vector / np.linalg.norm(vector))
            own = index.analyzer.term(word, remember=False)
            found = []
            for i in np.argsort(-similarity)[:50]:
                if similarity[i] < floor or len(found) >= most:
                    break
                term = vocabulary[words[i]]
                if term != own and all(term != seen for seen, _ in found):
                    found.append((term, float(similarity[i])))
            near[word] = found
        return found

    def rank(query: str) -> list[str]:
        scores = dict(index.ranked(query, limit=3000)[0])
        asked = set(index._asked(query))
        extra: dict[str, float] = {}
        for word in tx.words(query):
            if word.isalpha() and len(word) > 2 and word not in tx.STOP_WORDS:
                for term, cosine in neighbours(word):
                    if term not in asked:
                        extra[term] = max(extra.get(term, 0.0), weight * cosine)
        for term, share in extra.items():
            if not share:
                continue
            for doc, adds in index._concept(term)[0].items():
                scores[doc] = scores.get(doc, 0.0) + share * adds
        return [doc.name for doc, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0].name))[:10]]

    return rank


def ranker(index: SearchIndex, setting: Setting, catalog: Catalog | None = None) -> run.Ranker:
    if "servers" in setting:
        return server_scored(index, setting["servers"])
    if "split" in setting:
        return split_task(index, setting["split"])
    if "vectors" in setting:
        return vector_expanded(index, *setting["vectors"])
    if "server_named" in setting:
        return server_named(index, *setting["server_named"])
    if "cooccur" in setting:
        return cooccurring(index, *setting["cooccur"])
    if "in_name" in setting:
        return query_in_name(index, setting["in_name"])
    if "proximity" in setting:
        return proximity(index, *setting["proximity"])
    if "verbs" in setting:
        return verb_object(index, *setting["verbs"])
    if "meaning" in setting:
        assert catalog is not None
        return meaning(index, catalog, setting["meaning"])
    if isinstance(setting.get("name"), int):
        return short_named(index, setting["name"])
    if "feedback" in setting:
        return feedback(index, *setting["feedback"])
    if "evidence" in setting:
        return evidenced(index, setting["evidence"])
    return lambda q: [hit.doc.name for hit in index.find(q, limit=10).hits]


def figures(rank: run.Ranker, asked: Sequence[Query]) -> str:
    steps = run.recall(rank, [q for q in asked if q.kind == "step"])
    tasks = run.recall(rank, [q for q in asked if q.kind == "task"])
    return (
        f"steps {steps['recall@5']:.3f} {steps['mrr']:.3f}  tasks {tasks['recall@5']:.3f} {tasks['mrr']:.3f}"
    )


def against(base: Sequence[float], rank: run.Ranker, steps: Sequence[Query]) -> str:
    """Held-out steps query by query against the search as it is (spread.py)."""
    versus = spread.paired(base, run.found_at(rank, steps))
    return f"  | vs as it is: +{versus.gained} -{versus.lost} p={versus.p}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--heldout", action="store_true", help="the held-out part's figures (run once)")
    parser.add_argument("--only", action="append", default=[], help="only these candidates (repeatable)")
    parser.add_argument(
        "--like", action="append", default=[], help="also the candidates whose name has this (repeatable)"
    )
    args = parser.parse_args(argv)
    paths = sorted((HERE / "fixtures").glob("*.json"))
    found = run.listings(paths)
    _seed, heldout, tuning = labels.read_split()
    chosen = {
        name: s
        for name, s in CANDIDATES.items()
        if not (args.only or args.like) or name in args.only or any(part in name for part in args.like)
    }
    print("Recall@5 and MRR of steps and of whole tasks")
    base: list[float] = []  # held-out steps, query by query, as the search is
    if args.heldout:
        plain_catalog = catalog_for(found, {})
        assert plain_catalog.search is not None
        as_it_is = ranker(plain_catalog.search, {})
        held = [q for q in run.queries(plain_catalog) if labels.part(q, heldout, tuning) == "heldout"]
        base = run.found_at(as_it_is, [q for q in held if q.kind == "step"])
    for name, setting in chosen.items():
        if ("meaning" in setting or "vectors" in setting) and not run.sem.installed():
            print(f"{name:<34} not run: needs the assern[semantic] extra")
            continue
        with knobs(setting), contextlib.ExitStack() as stack:
            catalog = catalog_for(found, setting)  # fresh: the analyzer shapes the index
            assert catalog.search is not None
            if setting.get("name") == "idf":
                stack.enter_context(replaced(ix, "name_share", named_by_idf(catalog.search)))
            index = capped(catalog.search, setting["cap"]) if "cap" in setting else catalog.search
            if "prefix" in setting:
                index = prefixed(index, *setting["prefix"])
            if "delta" in setting:
                index = plus(index, setting["delta"])
            rank = ranker(index, setting, catalog)
            asked = run.queries(catalog)
            if args.heldout:
                part = [q for q in asked if labels.part(q, heldout, tuning) == "heldout"]
                line = f"heldout {figures(rank, part)}"
                readme = [q for q in part if q.source_set == "readme"]
                line += f"  | readme {figures(rank, readme)}"
                line += against(base, rank, [q for q in part if q.kind == "step"])
            else:
                tuned = [q for q in asked if labels.part(q, heldout, tuning) == "tuning"]
                units = sorted({q.unit for q in tuned})
                random.Random(FOLD_SEED).shuffle(units)
                first = set(units[: len(units) // 2])
                a = [q for q in tuned if q.unit in first]
                b = [q for q in tuned if q.unit not in first]
                line = f"A {figures(rank, a)} | B {figures(rank, b)} | both {figures(rank, tuned)}"
        print(f"{name:<34} {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
