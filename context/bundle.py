"""`get_context_for_prompt`'s bundle, chosen so that the whole answer keeps its budget.

A budget is a promise to the agent: whatever form the client hands the model, the
answer fits in `max_tokens`. A client hands it the text content (the summary, a
`--- path:lines` header before each snippet, the snippets, the hints) or the
`structuredContent` as compact JSON (its keys, quotes and escapes, and the `tokens`
figure itself), so both forms are measured in UTF-8 bytes, and the larger counts, at
`BYTES_PER_TOKEN` bytes a token. `tokens` is that count for the answer sent.

The sizes are exact, not estimated. At each step the bundle without its snippets'
texts (its skeleton: summary, paths, line ranges, hints) is rendered in both forms,
and each snippet's text adds its own bytes: as it is to the text, escaped to the JSON.
A snippet is taken only if the whole answer still fits with it, with its file's place
in the summary and the hints the file brings; one that does not fit whole is cut to
the lines that do, if enough of it is left to be worth it. A candidate sure not to fit
is turned away by a bound before anything is rendered (`Filler._hopeless`).
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from assern.context.rank import Scored

#: Bytes per token: the rule of thumb the instance's own estimate uses for tool lists
#: (assern.actors.router.views.BYTES_PER_TOKEN), for the same tokenizers; a test holds
#: the two equal (this package may not import the router).
BYTES_PER_TOKEN = 4
#: A snippet cut to fit keeps at least this many tokens of its text, or is left out.
MIN_CUT_TOKENS = 40
#: The summary quotes the question up to this many characters (a longer one is cut,
#: and shorter still when the budget could not hold even an empty answer with it).
QUOTED_CHARS = (200, 60, 0)
#: Bytes the summary's first words may lose as a file joins ("nothing in the index
#: matches" becomes "1 file for").
SLACK = 16
#: Reject by a bound (`Filler._hopeless`) before measuring: off only to show that the
#: bound changes no answer.
QUICK = True


class HintsOf(Protocol):
    """The hints of a bundle of these files, in their order, with these snippets each.

    `search` False: without looking up what is not known yet (the users of a symbol),
    so never more hints than with it: a bundle too large without them is too large.
    """

    def __call__(
        self, order: Sequence[str], chosen: Mapping[str, Sequence[Scored]], *, search: bool = True
    ) -> list[str]: ...


def utf8_size(text: str) -> int:
    """Bytes of `text` in UTF-8 (a lone surrogate counts its 3 bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def compact_json(value: Any) -> str:
    """`value` as compact JSON (no spaces, characters left unescaped), as it goes on the wire."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def escaped_size(text: str) -> int:
    """Bytes of `text` inside a JSON string as `compact_json` writes it (quotes excluded)."""
    return utf8_size(encode_basestring(text)) - 2


def tokens_of(size: int) -> int:
    """Tokens of `size` bytes, at the project's rule."""
    return math.ceil(size / BYTES_PER_TOKEN)


def render_bundle(bundle: Mapping[str, Any]) -> str:
    """The text rendering of `get_context_for_prompt`'s bundle."""
    lines = [bundle["summary"]]
    for file in bundle["files"]:
        for snippet in file["snippets"]:
            lines += ["", f"--- {file['path']}:{snippet['lines']}", snippet["text"]]
    if bundle["hints"]:
        lines += ["", *(f"hint: {hint}" for hint in bundle["hints"])]
    return "\n".join(lines)


def answer_size(bundle: Mapping[str, Any]) -> int:
    """Bytes of the larger form of `bundle` as sent: its text rendering or its compact JSON."""
    return max(utf8_size(render_bundle(bundle)), utf8_size(compact_json(bundle)))


class Cut:
    """A candidate's lines, and what the first k of them add to each form of the answer
    (measured as far as asked: most candidates are judged on their first lines)."""

    def __init__(self, item: Scored) -> None:
        self.item = item
        self.lines = item.hit.text.split("\n")
        #: text[k], json[k]: bytes of the first k lines joined, as text and escaped in JSON
        self.text = [0]
        self.json = [0]

    def sizes(self, count: int) -> tuple[int, int]:
        """Bytes of the first `count` lines joined: as text, and escaped in JSON."""
        while len(self.text) <= count:
            line = self.lines[len(self.text) - 1]
            newline = 1 if len(self.text) > 1 else 0  # the "\n" before every line but the first
            self.text.append(self.text[-1] + utf8_size(line) + newline)
            self.json.append(self.json[-1] + escaped_size(line) + 2 * newline)  # "\n" is 2 bytes escaped
        return self.text[count], self.json[count]

    def least(self, size: int) -> int:
        """The fewest lines whose text takes `size` bytes or more (all of them if fewer do)."""
        total = 0
        for count, line in enumerate(self.lines):
            if total >= size:
                return count
            total += utf8_size(line) + (1 if count else 0)  # with the "\n" before it
        return len(self.lines)

    def first(self, count: int) -> Scored:
        """The candidate with its first `count` lines."""
        if count == len(self.lines):
            return self.item
        hit = attrs.evolve(
            self.item.hit,
            text="\n".join(self.lines[:count]),
            end_line=self.item.hit.start_line + count - 1,
        )
        return attrs.evolve(self.item, hit=hit)


def summary_of(
    question: str, order: Sequence[str], chosen: Mapping[str, Sequence[Scored]], quoted: int
) -> str:
    """The bundle's first line: which files, and why each was chosen."""
    if quoted == 0:
        asked = "the task"
    elif len(question) > quoted:
        asked = repr(question[:quoted] + "…")
    else:
        asked = repr(question)
    if not order:
        return f"nothing in the index matches {asked}"
    why = "; ".join(reason_of(path, chosen[path]) for path in order)
    return f"{len(order)} file{'s' if len(order) > 1 else ''} for {asked}: {why}"


def reason_of(path: str, items: Sequence[Scored]) -> str:
    """Why the summary says `path` was chosen, for these of its snippets."""
    symbols = list(dict.fromkeys(sym for s in items for sym in s.because))
    if symbols:
        return f"{path} (defines {', '.join(symbols)})"
    named = list(dict.fromkeys(s.hit.symbol for s in items if s.hit.symbol))
    if named:
        return f"{path} (in {', '.join(named[:3])})"
    return f"{path} (matching words)"


def bundle_of(
    summary: str,
    order: Sequence[str],
    chosen: Mapping[str, Sequence[Scored]],
    hints: list[str],
    tokens: int,
    *,
    texts: bool = True,
) -> dict[str, Any]:
    """The bundle as `structuredContent`: the files in their order, each one's snippets by
    line (`texts` False: each text empty, the skeleton whose size is measured)."""
    files = []
    for path in order:
        items = sorted(chosen[path], key=lambda s: s.hit.start_line)
        snippets = [
            {"text": s.hit.text if texts else "", "lines": f"{s.hit.start_line}-{s.hit.end_line}"}
            for s in items
        ]
        files.append({"path": path, "snippets": snippets})
    return {"summary": summary, "files": files, "hints": hints, "tokens": tokens}


class Filler:
    """Chooses the snippets of one bundle, the candidates in their order, within the budget."""

    def __init__(self, question: str, *, max_files: int, max_tokens: int, hints: HintsOf) -> None:
        self.question = question
        self.max_files = max_files
        self.max_tokens = max_tokens
        self.limit = max_tokens * BYTES_PER_TOKEN
        self.hints = hints
        #: the hints of each state tried, by its files and their symbols: what they
        #: depend on (and one answer sees one count of the files pending, whatever
        #: the indexer does meanwhile)
        self._hints: dict[tuple[tuple[str, ...], tuple[str, ...], bool], list[str]] = {}
        self.order: list[str] = []
        self.chosen: dict[str, list[Scored]] = {}
        #: bytes the chosen snippets' texts add to the skeleton, as text and as JSON
        self.text_bytes = 0
        self.json_bytes = 0
        self.quoted = QUOTED_CHARS[0]
        for chars in QUOTED_CHARS:  # a question quoted short enough for an empty answer to fit
            self.quoted = chars
            if max(self._forms([], {}, 0, 0)) <= self.limit:
                break
        #: the JSON form's bytes of the snippets taken so far
        self.json_size = self._forms([], {}, 0, 0)[1]

    def _hints_of(
        self, order: Sequence[str], chosen: Mapping[str, Sequence[Scored]], *, search: bool = True
    ) -> list[str]:
        symbols = tuple(sym for path in order for s in chosen[path] for sym in s.because)
        key = (tuple(order), symbols, search)
        if key not in self._hints:
            self._hints[key] = self.hints(order, chosen, search=search)
        return self._hints[key]

    def _forms(
        self,
        order: Sequence[str],
        chosen: Mapping[str, Sequence[Scored]],
        text_bytes: int,
        json_bytes: int,
        *,
        search: bool = True,
    ) -> tuple[int, int]:
        """Bytes of the answer of these snippets as text and as JSON, their texts' bytes given apart."""
        summary = summary_of(self.question, order, chosen, self.quoted)
        hints = self._hints_of(order, chosen, search=search)
        # `tokens` at its largest, max_tokens: the answer's own figure has no more digits
        skeleton = bundle_of(summary, order, chosen, hints, self.max_tokens, texts=False)
        return utf8_size(render_bundle(skeleton)) + text_bytes, utf8_size(compact_json(skeleton)) + json_bytes

    def _hopeless(self, cut: Cut, count: int) -> bool:
        """Whether the first `count` lines of `cut` are sure not to fit, judged without
        rendering: the JSON form grows by their escaped text and at least 24 bytes of
        snippet (`{"text":"","lines":"1-1"}`), and can shrink only by the summary's
        reason for their file (if chosen already) or by the hints that name it (if not,
        the hints of the users of its own symbols left aside: they only add), and by a
        few bytes of the summary's first words (`SLACK`)."""
        path = cut.item.hit.path
        if path in self.chosen:
            shrink = escaped_size(reason_of(path, self.chosen[path]))
        else:
            shrink = sum(
                escaped_size(hint) + 3 for hint in self._hints_of(self.order, self.chosen) if path in hint
            )
        return self.json_size + 24 + cut.sizes(count)[1] - shrink - SLACK > self.limit

    def _fits_with(self, cut: Cut, count: int, *, search: bool = True) -> bool:
        """Whether the answer still fits with the first `count` lines of `cut`."""
        item = cut.first(count)
        path = item.hit.path
        order = self.order if path in self.chosen else [*self.order, path]
        chosen = {**self.chosen, path: [*self.chosen.get(path, []), item]}
        text, data = cut.sizes(count)
        forms = self._forms(order, chosen, self.text_bytes + text, self.json_bytes + data, search=search)
        return max(forms) <= self.limit

    def offer(self, candidate: Scored) -> None:
        """Take `candidate` whole, or cut to the lines that fit, or leave it out."""
        path = candidate.hit.path
        if path not in self.chosen and len(self.order) >= self.max_files:
            return
        cut = Cut(candidate)
        whole = len(cut.lines)
        # the fewest lines worth keeping (all of a short snippet): if they do not fit,
        # nothing of it does, since more lines never take fewer bytes
        least = cut.least(MIN_CUT_TOKENS * BYTES_PER_TOKEN)
        # judged first by a bound, then without searching the index for the users of its symbols
        if QUICK and self._hopeless(cut, least):
            return
        if not self._fits_with(cut, least, search=False) or not self._fits_with(cut, least):
            return
        count = least
        if least < whole and self._fits_with(cut, whole):
            count = whole
        elif least < whole:  # the most lines that fit
            high = whole - 1
            while count < high:
                middle = (count + high + 1) // 2
                if self._fits_with(cut, middle):
                    count = middle
                else:
                    high = middle - 1
        if path not in self.chosen:
            self.order.append(path)
            self.chosen[path] = []
        self.chosen[path].append(cut.first(count))
        text, data = cut.sizes(count)
        self.text_bytes += text
        self.json_bytes += data
        self.json_size = self._forms(self.order, self.chosen, self.text_bytes, self.json_bytes)[1]

    def bundle(self) -> dict[str, Any]:
        """The bundle of the snippets taken, `tokens` saying the size of its larger form."""
        summary = summary_of(self.question, self.order, self.chosen, self.quoted)
        hints = self._hints_of(self.order, self.chosen)
        bundle = bundle_of(summary, self.order, self.chosen, hints, self.max_tokens)
        # the figure is part of what it counts: settle it (it only shrinks, digits with it)
        while True:
            tokens = tokens_of(answer_size(bundle))
            if tokens == bundle["tokens"]:
                return bundle
            bundle["tokens"] = tokens


def fill(
    question: str,
    candidates: Iterable[Scored],
    *,
    max_files: int,
    max_tokens: int,
    hints: HintsOf,
) -> dict[str, Any]:
    """The bundle of `candidates` (best first) for `question` within `max_tokens`: at most
    `max_files` files, each once, its snippets by line, and `hints(order, chosen)`."""
    filler = Filler(question, max_files=max_files, max_tokens=max_tokens, hints=hints)
    for candidate in candidates:
        filler.offer(candidate)
    return filler.bundle()
