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
        self.frequencies: list[Counter[str]] = []
        self.lengths: list[int] = []
        for name, bag in documents:
            self.names.append(name)
            self.frequencies.append(Counter(bag))
            self.lengths.append(len(bag))
        self.average = sum(self.lengths) / len(self.lengths) if self.lengths else 1.0
        self.df: Counter[str] = Counter()
        for frequencies in self.frequencies:
            self.df.update(frequencies.keys())

    def idf(self, word: str) -> float:
        df = self.df.get(word, 0)
        return math.log(1.0 + (len(self.names) - df + 0.5) / (df + 0.5))

    def ranked(self, query: str, limit: int = 10) -> list[str]:
        asked = set(words(query))
        scores: list[tuple[float, str]] = []
        for name, frequencies, length in zip(self.names, self.frequencies, self.lengths, strict=True):
            score = 0.0
            for word in asked:
                tf = frequencies.get(word, 0)
                if tf:
                    norm = 1.0 - B + B * length / self.average
                    score += self.idf(word) * tf * (K1 + 1) / (tf + K1 * norm)
            if score > 0:
                scores.append((score, name))
        scores.sort(key=lambda item: (-item[0], item[1]))
        return [name for _, name in scores[:limit]]
