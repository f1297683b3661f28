"""Code and questions into index terms: identifiers split, stems, whole identifiers kept.

Words come from `assern.actors.search.text.words`, the tokeniser of the tool search
(snake, kebab, dotted and camel case split apart), so both searches split identifiers
the same way. Each word becomes its Snowball English stem unless it is a stop word; and
each identifier of two or more words is also kept whole, its words joined
(`get_user_name` and `getUserName` both give `getusername`), so a query naming an
identifier finds it exactly as well as by its parts.

The stop words are English function words only: the tool search's list also drops
words such as "server" and "tool", which are names in code.
"""

from __future__ import annotations

import re

import snowballstemmer

from assern.actors.search.text import words

#: English function words, dropped from code and questions alike.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each either
    few for from further had has have having he her here hers him his how i if in into is
    it its itself just me might more most must my myself no nor not of off on once only or
    other our ours out over own same she should so some such than that the their theirs
    them then there these they this those through to too under until up us very was we
    were what when where which while who whom why will with would you your yours
    does did done please find show tell me where's what's how's
    """.split()  # noqa: SIM905 - a word list reads better as text
)

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::|->)[A-Za-z_$][A-Za-z0-9_$]*)*")


#: The tokens terms are made of: identifiers and numbers (`$` is part of JavaScript names).
_TOKEN = re.compile(r"[A-Za-z0-9_$]+")


class Terms:
    """Turns text into terms; remembers the terms of every token it has seen (bounded)."""

    #: Past this many remembered words or tokens a memo is cleared (a guard for huge trees).
    MEMO_LIMIT = 500_000

    def __init__(self) -> None:
        self._stemmer = snowballstemmer.stemmer("english")
        self._stems: dict[str, str] = {}
        self._tokens: dict[str, tuple[str, ...]] = {}

    def stem(self, word: str) -> str:
        """The term of one lower-case word ("" for a stop word or a single letter)."""
        stem = self._stems.get(word)
        if stem is None:
            stem = "" if word in STOP_WORDS or len(word) < 2 else self._stemmer.stemWord(word)
            if len(self._stems) >= self.MEMO_LIMIT:
                self._stems.clear()
            self._stems[word] = stem
        return stem

    def token(self, token: str) -> tuple[str, ...]:
        """The terms of one identifier or number: its words' stems, then, for an
        identifier of several words, those words joined."""
        found = self._tokens.get(token)
        if found is None:
            parts = words(token)
            found = tuple(stem for word in parts if (stem := self.stem(word)))
            if len(parts) > 1:
                found += ("".join(parts),)
            if len(self._tokens) >= self.MEMO_LIMIT:
                self._tokens.clear()
            self._tokens[token] = found
        return found

    def terms(self, text: str) -> list[str]:
        """Every term of `text` in order, repeats kept (term frequency counts them)."""
        found: list[str] = []
        for token in _TOKEN.findall(text):
            found.extend(self._tokens.get(token) or self.token(token))
        return found


def compounds(text: str) -> list[str]:
    """The identifiers of `text` that have two or more words, each as its words joined."""
    found = []
    for identifier in _IDENTIFIER.findall(text):
        for part in re.split(r"\.|::|->", identifier):
            parts = words(part)
            if len(parts) > 1:
                found.append("".join(parts))
    return found


def identifiers(text: str) -> list[str]:
    """The identifier-like tokens of a question, as written (`Retry.decide`, `get_file`)."""
    return _IDENTIFIER.findall(text)
