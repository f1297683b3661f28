"""Learning from use: the tools a search answered and that were then called, counted per
user, and the bounded boost those counts give the same tools in later searches.

What is kept is tool names and counts, nothing else: never a call's arguments or its
result, nor the query's words. A connection remembers the tools its last `search_tools`
answered; when one of them is called (and answers), the listener appends
`(server, tool)` to the `UseRecorder` in memory (O(1), no I/O on the call path). The
learning actor (learned_actor.py) merges those records into the use file under
`$ASSERN_HOME` from a worker thread every few seconds and at shutdown, and publishes the
merged counts as an immutable `Learned` snapshot, which searches read.

The file (`search-use.json`) is one JSON object::

    {"format": "assern-search-use", "version": 1,
     "tools": {"SERVER": {"TOOL": CALLS, ...}, ...}}

It is bounded (`MAX_TOOLS` tools; when the calls add up past `MAX_CALLS`, every count is
halved, which also lets old habits fade), written whole to a temporary file and renamed
over the old one, under an exclusive lock (`search-use.lock`) taken around the
read-merge-write: several instances sharing one `$ASSERN_HOME` add their counts up and
lose none. A file that cannot be read (corrupt, another format) is set aside as
`search-use.json.bad` and counting starts again.

The boost (`boost`): a tool called `n` times gets `MAX_BOOST * n / (n + HALF)` of the
best score of the answer added to its own; only the tools the ranking found for the
query are re-ranked (a habit never brings in a tool that does not match), and a tool
asked for by its exact name stays first. The simulated-use evaluation of
ops/bench/search/run.py chose a per-tool prior over a query-word association (see
docs/search-evaluation.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.search.rescore import rescored

if TYPE_CHECKING:
    from pathlib import Path

    from assern.actors.search.index import Doc, Found

FORMAT = "assern-search-use"
VERSION = 1
#: the most tools the file keeps (the least called go first)
MAX_TOOLS = 2000
#: when the calls add up past this, every count is halved (and those at 0 dropped)
MAX_CALLS = 100_000
#: the most calls kept in memory between two merges (older ones are dropped first)
MAX_PENDING = 10_000
#: the largest boost, as a share of the answer's best score
MAX_BOOST = 0.3
#: the calls at which a tool gets half of `MAX_BOOST`
HALF = 3.0
#: how many of the best tools by the ranking itself are re-ranked
CANDIDATES = 20

Key = tuple[str, str]


def use_file(assern_home: Path) -> Path:
    """Where the use counts of the instances under `assern_home` are kept."""
    return assern_home / "search-use.json"


@attrs.frozen
class Learned:
    """The merged counts, as searches read them: (server, tool) -> calls."""

    calls: Mapping[Key, int] = attrs.field(factory=dict)

    def boost(self, server: str, tool: str) -> float:
        """The share (0 ≤ share < `MAX_BOOST`) of the best score a tool gets added."""
        count = self.calls.get((server, tool), 0)
        return MAX_BOOST * count / (count + HALF) if count > 0 else 0.0

    def __bool__(self) -> bool:
        return bool(self.calls)


NOTHING = Learned()


def reranked(found: Found, learned: Learned, limit: int, exact: Iterable[Doc] = ()) -> Found:
    """`found` (the ranking's best, usually more than `limit`) re-ranked with the learned
    boost, cut to `limit`. Tools named exactly by the query stay first."""
    if not learned or not found.hits:
        return attrs.evolve(found, hits=found.hits[:limit])
    top = max(hit.score for hit in found.hits)
    scores = [hit.score + top * learned.boost(hit.doc.server, hit.doc.tool) for hit in found.hits]
    return rescored(found, scores, limit, exact)


# ------------------------------------------------------------------- recording


class UseRecorder:
    """The calls made since the last merge, in memory (appended on the call path)."""

    def __init__(self, maxlen: int = MAX_PENDING) -> None:
        self._pending: deque[Key] = deque(maxlen=maxlen)

    def called(self, server: str, tool: str) -> None:
        """One call of a tool a search answered: O(1), no I/O."""
        self._pending.append((server, tool))

    def taken(self) -> dict[Key, int]:
        """The calls recorded so far, counted, and forgotten here."""
        counted: dict[Key, int] = {}
        while self._pending:
            key = self._pending.popleft()
            counted[key] = counted.get(key, 0) + 1
        return counted

    def __len__(self) -> int:
        return len(self._pending)


# ---------------------------------------------------------- merging, bounding


def merged(counts: Mapping[Key, int], added: Mapping[Key, int]) -> dict[Key, int]:
    """`counts` with `added` added, bounded (`bounded`)."""
    total = dict(counts)
    for key, count in added.items():
        if count > 0:
            total[key] = total.get(key, 0) + count
    return bounded(total)


def bounded(
    counts: Mapping[Key, int], max_tools: int = MAX_TOOLS, max_calls: int = MAX_CALLS
) -> dict[Key, int]:
    """At most `max_tools` tools (the most called; ties by name), the counts halved
    until they add up to at most `max_calls`."""
    kept = {key: count for key, count in counts.items() if count > 0}
    while sum(kept.values()) > max_calls:
        kept = {key: count // 2 for key, count in kept.items() if count // 2 > 0}
    if len(kept) > max_tools:
        best = sorted(kept.items(), key=lambda item: (-item[1], item[0]))[:max_tools]
        kept = dict(best)
    return kept


# ------------------------------------------------------------------ the file


class BadUseFile(ValueError):
    """The use file is not one this version reads."""


def parse(text: str) -> dict[Key, int]:
    """The counts of a use file's text.

    Raises:
        BadUseFile: it is not JSON of the format above.
    """
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise BadUseFile(f"not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise BadUseFile(f"not a {FORMAT} file of version {VERSION}")
    tools = raw.get("tools")
    if not isinstance(tools, dict):
        raise BadUseFile("`tools` must be an object of servers")
    counts: dict[Key, int] = {}
    for server, named in tools.items():
        if not isinstance(named, dict):
            raise BadUseFile(f"`tools.{server}` must be an object of tool names and counts")
        for tool, count in named.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise BadUseFile(f"`tools.{server}.{tool}` must be a count, got {count!r}")
            if count:
                counts[server, tool] = count
    return counts


def render(counts: Mapping[Key, int]) -> str:
    """The text of a use file holding `counts` (servers and tools sorted)."""
    tools: dict[str, dict[str, int]] = {}
    for (server, tool), count in sorted(counts.items()):
        tools.setdefault(server, {})[tool] = count
    document: dict[str, Any] = {"format": FORMAT, "version": VERSION, "tools": tools}
    return json.dumps(document, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(path: Path) -> dict[Key, int]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        return parse(text)
    except BadUseFile:
        os.replace(path, path.with_name(path.name + ".bad"))
        raise


def load(path: Path) -> Learned:
    """The counts in the file (none when it is absent). Blocking: call from a thread.

    Raises:
        BadUseFile: the file was set aside (`.bad`) because it could not be read.
    """
    with _locked(path):
        return Learned(_read(path))


def save(path: Path, added: Mapping[Key, int]) -> Learned:
    """Add `added` to the file's counts under its lock and write it whole; the merged
    counts. Blocking: call from a thread. A file that cannot be read is set aside
    (`.bad`) and replaced by the new counts alone."""
    with _locked(path):
        try:
            counts = _read(path)
        except BadUseFile:
            counts = {}
        total = merged(counts, added)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(render(total), encoding="utf-8")
        os.replace(temporary, path)
    return Learned(total)
