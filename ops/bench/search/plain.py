"""A plain BM25 over the same tools: the textbook ranking the search is measured against.

One document per tool: its server's name, its own name, its description and its
parameters' names and descriptions, as one bag of words. Words are split as the index
splits identifiers (snake, kebab, camel case) and lower-cased; nothing else: no stop
words, no stems, no synonyms, no fields, no rule for a tool asked by its name.
k1 = 1.2, b = 0.75 (Robertson & Zaragoza 2009).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import mcp_types as types

from assern.actors.search.index import parameter_texts
from assern.actors.search.text import words

K1 = 1.2
B = 0.75


def tool_words(server: str, name: str, tool: types.Tool) -> list[str]:
    texts = [server, name, tool.title or "", tool.description or "", *parameter_texts(tool.input_schema)]
    return [word for text in texts for word in words(text)]


class PlainBM25:
    """Textbook BM25 over (exposed name, its words) pairs."""

    def __init__(self, documents: Iterable[tuple[str, Sequence[str]]]) -> None:
        self.names: list[str] = []
        lengths: list[int] = []
        #: word -> (document, its frequency there) for every document that has it
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for number, (name, bag) in enumerate(documents):
            self.names.append(name)
            lengths.append(len(bag))
            for word, tf in Counter(bag).items():
                self.postings.setdefault(word, []).append((number, tf))
        average = sum(lengths) / len(lengths) if lengths else 1.0
        self.norms = [1.0 - B + B * length / average for length in lengths]

    def idf(self, word: str) -> float:
        df = len(self.postings.get(word, ()))
        return math.log(1.0 + (len(self.names) - df + 0.5) / (df + 0.5))

    def ranked(self, query: str, limit: int = 10) -> list[str]:
        scores: dict[int, float] = {}
        for word in set(words(query)):
            idf = self.idf(word)
            for number, tf in self.postings.get(word, ()):
                added = idf * tf * (K1 + 1) / (tf + K1 * self.norms[number])
                scores[number] = scores.get(number, 0.0) + added
        best = sorted(scores.items(), key=lambda item: (-item[1], self.names[item[0]]))
        return [self.names[number] for number, _ in best[:limit]]
