"""Text into search terms: identifiers split into words, stop words dropped, English stems.

Tool names are identifiers (`list_issues`, `createPullRequest`, `read-file`), their
descriptions prose; a query is either a few keywords or a whole task sentence. All go
through the same `Analyzer`, so "listing the repository's open issues" and
`list_repo_issues` meet on `list`, `repositori`/`repo`, `issu`. Stems come from the
Snowball English stemmer; each analyzer remembers the stems it computed (a catalog has
a few thousand distinct words, a stem costs about 18 µs).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

#: words too common in tool descriptions and requests to tell tools apart
STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during
    each either etc few for from further had has have having he her here hers him his how
    i if in into is it its itself just let lets may me might more most must my myself no
    nor not now of off on once one only or other our ours out over own please same she
    should so some such than that the their theirs them then there these they this those
    through to too under until up us use used uses using very via was we were what when
    where which while who whom why will with would you your yours
    tool tools mcp server servers given specified want need needs like
    """.split()  # noqa: SIM905 - a word list reads better as text
)

#: words that ask for the same thing in tool catalogs; a query's word also looks for the
#: others of its group, at `SYNONYM_WEIGHT` (lexical search cannot know that a folder is
#: a directory; the optional semantic ranking can)
SYNONYMS = (
    "directory folder dir",
    "delete remove erase destroy",
    "create make new add",
    "get fetch retrieve",
    "search find lookup look query",
    "send post publish",
    "message msg chat",
    "update edit modify change",
    "run execute exec invoke",
    "image picture photo screenshot",
    "repository repo",
    "issue ticket bug",
    "email mail",
    "website site webpage page url web",
    "user person member people",
    "event meeting appointment",
    "write save store",
    "show display view",
)
SYNONYM_WEIGHT = 0.5

#: words, with camelCase and ACRONYMWord boundaries split; digits stay with their letters
#: (s3, ec2); anything that is not a letter or a digit separates words (snake, kebab, dots)
_WORD = re.compile(r"[A-Z0-9]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")


def words(text: str) -> list[str]:
    """The lower-case words of `text`: snake, kebab, dotted and camel case split apart."""
    return [word.lower() for word in _WORD.findall(text)]


class Analyzer:
    """Words into index terms (stems of the words that are not stop words), memoised."""

    def __init__(self) -> None:
        # Imported here, not with the module: an instance that never searches never loads
        # the Snowball package (every language's stemmer, about 3 MB resident).
        import snowballstemmer

        self._stemmer = snowballstemmer.stemmer("english")
        #: word -> its term, or "" for a word that is no term (a stop word, one letter)
        self._terms: dict[str, str] = {}
        self._groups: dict[str, tuple[str, ...]] | None = None

    def term(self, word: str, *, remember: bool = True) -> str:
        """The term of one lower-case word ("" when it is none)."""
        term = self._terms.get(word)
        if term is None:
            term = "" if word in STOP_WORDS or len(word) < 2 else self._stemmer.stemWord(word)
            if remember:
                self._terms[word] = term
        return term

    def terms(self, text: str, *, remember: bool = True) -> list[str]:
        """The terms of `text`, in order, repeats kept (term frequency counts them).

        Without `remember`, words not met before are not kept: a query's words would
        otherwise grow the memo for as long as the process runs.
        """
        known = self._terms
        found: list[str] = []
        for match in _WORD.findall(text):
            word = match.lower()
            term = known.get(word)
            if term is None:
                term = self.term(word, remember=remember)
            if term:
                found.append(term)
        return found

    def synonyms(self, term: str) -> tuple[str, ...]:
        """The other terms of `term`'s synonym group (none for most terms)."""
        if self._groups is None:
            groups: dict[str, tuple[str, ...]] = {}
            for group in SYNONYMS:
                stems = tuple(dict.fromkeys(self._stemmer.stemWord(word) for word in group.split()))
                for stem in stems:
                    groups[stem] = tuple(other for other in stems if other != stem)
            self._groups = groups
        return self._groups.get(term, ())

    def expand(self, terms: Iterable[str]) -> dict[str, float]:
        """`terms` (weight 1) and the other terms of their synonym groups (`SYNONYM_WEIGHT`)."""
        weighted = dict.fromkeys(terms, 1.0)
        for term in list(weighted):
            for other in self.synonyms(term):
                weighted.setdefault(other, SYNONYM_WEIGHT)
        return weighted

    def terms_of(self, texts: Iterable[str]) -> list[str]:
        found: list[str] = []
        for text in texts:
            found.extend(self.terms(text))
        return found
