"""The context benchmark's pure parts: the plain BM25 baseline, the grep baseline's
ranking, and the file-level metrics (NDCG@k, Recall@k) every ranking is scored by.

The BM25 here is the textbook one on purpose (Robertson and Zaragoza's, k1 = 1.2,
b = 0.75, the non-negative idf `ln(1 + (N - n + 0.5) / (n + 0.5))`) over whole files,
with a tokeniser that knows nothing of code: lower-cased runs of word characters, so
`parse_args` stays one token and `parseArgs` becomes `parseargs`. It is the floor a
context engine has to clear, not a rival to tune.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

MAX_FILE_BYTES = 1 << 20
_WORD = re.compile(r"\w+")

# The grep baseline drops these before it searches (an agent grepping a codebase does
# not grep for "how" or "the"); BM25 keeps every token and lets idf weigh them.
STOPWORDS = frozenset(
    _WORD.findall("""
    a an and are as at be by can do does for from get gets how i in into is it its
    me my of on or so that the their them then there these this to up use used uses
    what when where which who why with without would
    """)
)


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def grep_words(query: str) -> list[str]:
    """The words the grep baseline searches for: the query's tokens less stop words and
    one-letter tokens, each once, in order."""
    seen: dict[str, None] = {}
    for token in tokenize(query):
        if len(token) > 1 and token not in STOPWORDS:
            seen.setdefault(token)
    return list(seen)


def read_text_files(root: Path, max_bytes: int = MAX_FILE_BYTES) -> dict[str, str]:
    """Every text file under root by relative POSIX path: binary files (a NUL byte in the
    first 8 KiB) and files over max_bytes are left out, as any code search leaves them."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > max_bytes:
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        found[path.relative_to(root).as_posix()] = data.decode("utf-8", errors="replace")
    return found


@attrs.frozen
class BM25:
    """A BM25 index over whole documents, built once."""

    k1: float
    b: float
    lengths: Mapping[str, int]
    average: float
    postings: Mapping[str, Mapping[str, int]]  # token -> document -> term frequency

    @classmethod
    def build(cls, documents: Mapping[str, str], k1: float = 1.2, b: float = 0.75) -> BM25:
        postings: dict[str, dict[str, int]] = {}
        lengths = {}
        for name, text in documents.items():
            counts = Counter(tokenize(text))
            lengths[name] = sum(counts.values())
            for token, count in counts.items():
                postings.setdefault(token, {})[name] = count
        average = sum(lengths.values()) / len(lengths) if lengths else 0.0
        return cls(k1=k1, b=b, lengths=lengths, average=average, postings=postings)

    def idf(self, token: str) -> float:
        n = len(self.postings.get(token, ()))
        return math.log(1 + (len(self.lengths) - n + 0.5) / (n + 0.5))

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The k best documents for the query, best first (ties by name)."""
        scores: dict[str, float] = {}
        for token in tokenize(query):  # a repeated query word counts again, as in the formula
            weight = self.idf(token)
            for name, tf in self.postings.get(token, {}).items():
                norm = self.k1 * (1 - self.b + self.b * self.lengths[name] / self.average)
                scores[name] = scores.get(name, 0.0) + weight * tf * (self.k1 + 1) / (tf + norm)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def rank_by_counts(counts: Mapping[str, int], k: int = 10) -> list[str]:
    """The grep baseline's ranking: files by their number of matches, most first (ties by
    name), files without a match left out."""
    return [name for name, count in sorted(counts.items(), key=lambda i: (-i[1], i[0])) if count > 0][:k]


def files_in_order(paths: Iterable[str]) -> list[str]:
    """A result list reduced to its files, each at the rank of its first result."""
    return list(dict.fromkeys(paths))


def ndcg(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    """NDCG@k with graded relevance 1 for each relevant file (binary gains), over a list
    of distinct files; 0 when nothing relevant is in the first k."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("a query needs at least one relevant file")
    gain = sum(1 / math.log2(rank + 2) for rank, name in enumerate(ranked[:k]) if name in wanted)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), k)))
    return gain / ideal


def recall(ranked: Sequence[str], relevant: Iterable[str], k: int = 5) -> float:
    """The share of the relevant files that are among the first k."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("a query needs at least one relevant file")
    return len(wanted & set(ranked[:k])) / len(wanted)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between the closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)
