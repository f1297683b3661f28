"""JSON (and JSON with comments) read with the place of every value, and edited in place.

A client's config file is edited as text, not re-dumped: the keys it does not concern,
their order, the indentation, and (in JSONC) the comments and trailing commas stay as
the user or the client wrote them. `parse` gives the document as plain data and, for
every object and array, where each member starts and ends; the edit functions return
the new text. `with_member` and `without_member` are the only two changes made: add
(or replace) one member of an object, remove one member.

Strict JSON (Claude Code, Cursor, Gemini CLI...) rejects comments and trailing commas as
their clients do; JSONC (VS Code's mcp.json) allows both.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS = {"true": True, "false": False, "null": None}


class JsonError(ValueError):
    """The text is not valid JSON (or JSONC); the message names the line and column."""


@attrs.frozen
class Member:
    """One `"key": value` of an object.

    Attributes:
        key: The decoded key.
        start: Offset of the key's opening quote.
        value: The value's node.
        comma: Offset of the comma that follows the member, or None (the last one).
    """

    key: str
    start: int
    value: Node
    comma: int | None

    @property
    def end(self) -> int:
        return self.value.end


@attrs.frozen
class Node:
    """A value and where it is: `text[start:end]` is its JSON text.

    `members` is set for an object (in file order, duplicates kept), `items` for an array.
    """

    start: int
    end: int
    data: Any
    members: tuple[Member, ...] | None = None
    items: tuple[Node, ...] | None = None

    def member(self, key: str) -> Member | None:
        """The last member named `key` (the one a JSON reader keeps), or None."""
        found = [m for m in self.members or () if m.key == key]
        return found[-1] if found else None

    def find(self, path: tuple[str, ...]) -> Node | None:
        """The object node at `path` of keys below this one, or None."""
        node: Node | None = self
        for key in path:
            member = node.member(key) if node is not None and node.members is not None else None
            node = member.value if member is not None else None
        return node


class _Parser:
    def __init__(self, text: str, *, comments: bool) -> None:
        self.text = text
        self.comments = comments
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> JsonError:
        where = self.pos if pos is None else pos
        line = self.text.count("\n", 0, where) + 1
        column = where - (self.text.rfind("\n", 0, where) + 1) + 1
        return JsonError(f"{message} (at line {line}, column {column})")

    def skip(self) -> None:
        """Whitespace, and comments where allowed."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos) and self.comments:
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos) and self.comments:
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            elif char == "/":
                raise self.fail("comments are not allowed in this file")
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("expected a value, got the end of the file")
        char = self.text[self.pos]
        if char == "{":
            return self.container("{", "}", depth)
        if char == "[":
            return self.container("[", "]", depth)
        if char == '"':
            start = self.pos
            decoded = self.string()
            return Node(start, self.pos, decoded)
        for word, data in _WORDS.items():
            if self.text.startswith(word, self.pos):
                start = self.pos
                self.pos += len(word)
                return Node(start, self.pos, data)
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"unexpected character {char!r}")
        self.pos = match.end()
        return Node(match.start(), match.end(), json.loads(match.group()))

    def string(self) -> str:
        start = self.pos
        i = start + 1
        text = self.text
        while i < len(text):
            char = text[i]
            if char == "\\":
                i += 2
                continue
            if char == '"':
                self.pos = i + 1
                try:
                    decoded = json.loads(text[start : i + 1])
                except json.JSONDecodeError:
                    raise self.fail("invalid string", start) from None
                return str(decoded)
            if char == "\n":
                break
            i += 1
        raise self.fail("unterminated string", start)

    def container(self, opening: str, closing: str, depth: int) -> Node:
        start = self.pos
        self.pos += 1
        members: list[Member] = []
        items: list[Node] = []
        while True:
            self.skip()
            if self.text.startswith(closing, self.pos):
                trailing = (members[-1].comma if members else None) if opening == "{" else None
                if (trailing is not None or (items and self._trailing_item)) and not self.comments:
                    raise self.fail("a trailing comma is not allowed here")
                self.pos += 1
                break
            if (members or items) and not self._after_comma:
                raise self.fail(f"expected ',' or {closing!r}")
            self._after_comma = False
            self._trailing_item = False
            if opening == "{":
                if not self.text.startswith('"', self.pos):
                    raise self.fail("expected a key in double quotes")
                key_start = self.pos
                key = self.string()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':' after the key")
                self.pos += 1
                value = self.value(depth + 1)
                comma = self._comma()
                members.append(Member(key, key_start, value, comma))
            else:
                items.append(self.value(depth + 1))
                self._trailing_item = self._comma() is not None
        if opening == "{":
            data = {member.key: member.value.data for member in members}
            return Node(start, self.pos, data, members=tuple(members))
        return Node(start, self.pos, [item.data for item in items], items=tuple(items))

    _after_comma = False
    _trailing_item = False

    def _comma(self) -> int | None:
        self.skip()
        if self.text.startswith(",", self.pos):
            self._after_comma = True
            self.pos += 1
            return self.pos - 1
        return None


def parse(text: str, *, comments: bool = False) -> Node:
    """Parse a whole document.

    Args:
        text: The file's text.
        comments: Allow `//` and `/* */` comments and trailing commas (JSONC).

    Raises:
        JsonError: not valid; the message says what and where.
    """
    parser = _Parser(text, comments=comments)
    node = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the document")
    return node


# ----------------------------------------------------------------------- editing


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent_of(text: str, pos: int) -> str:
    start = _line_start(text, pos)
    head = text[start:pos]
    return head if not head.strip() else re.match(r"[ \t]*", head).group()  # type: ignore[union-attr]  # the pattern matches the empty string


def _render(value: Any, indent: str, unit: str | None) -> str:
    """JSON text of `value`, its continuation lines indented by `indent`."""
    if unit is None:
        return json.dumps(value, ensure_ascii=False)
    body = json.dumps(value, indent=unit, ensure_ascii=False)
    return body.replace("\n", "\n" + indent)


def _layout(text: str, obj: Node) -> tuple[str | None, str]:
    """(the indent unit, or None for a one-line object; the members' indent)."""
    own = _indent_of(text, obj.start)
    members = obj.members or ()
    if members:
        first = members[0]
        if "\n" not in text[obj.start : first.start]:
            return None, own
        indent = _indent_of(text, first.start)
        unit = indent[len(own) :] if indent.startswith(own) and len(indent) > len(own) else "  "
        return unit, indent
    if "\n" in text[obj.start : obj.end]:
        return "  ", own + "  "
    # An empty `{}`: expand it on its own lines when the file is laid out over lines.
    return ("  ", own + "  ") if "\n" in text else (None, own)


def _object_at(text: str, path: tuple[str, ...], comments: bool) -> Node:
    node = parse(text, comments=comments).find(path)
    if node is None or node.members is None:
        raise KeyError(path)
    return node


def with_member(text: str, path: tuple[str, ...], key: str, value: Any, *, comments: bool = False) -> str:
    """`text` with `key: value` set in the object at `path` (appended, or its value replaced).

    The new value is laid out like the file: indented by the members' indent, or on one
    line in a one-line object.

    Raises:
        KeyError: no object at `path`.
        JsonError: `text` is not valid.
    """
    obj = _object_at(text, path, comments)
    unit, indent = _layout(text, obj)
    existing = obj.member(key)
    if existing is not None:
        node = existing.value
        return text[: node.start] + _render(value, indent, unit) + text[node.end :]
    member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent, unit)}"
    members = obj.members or ()
    if not members:  # after any comment the object holds
        if unit is None:
            return text[: obj.end - 1] + member + text[obj.end - 1 :]
        head = text[: obj.end - 1].rstrip(" \t\n")
        return f"{head}\n{indent}{member}\n{_indent_of(text, obj.start)}" + text[obj.end - 1 :]
    last = members[-1]
    if last.comma is not None:  # a trailing comma (JSONC): ours follows it, with one of its own
        separator = f"\n{indent}" if unit is not None else " "
        return text[: last.comma + 1] + separator + member + "," + text[last.comma + 1 :]
    separator = f",\n{indent}" if unit is not None else ", "
    return text[: last.end] + separator + member + text[last.end :]


def without_member(text: str, path: tuple[str, ...], key: str, *, comments: bool = False) -> str:
    """`text` without the members named `key` of the object at `path`.

    A member's line goes with it when it stands alone on its lines; the comma before it
    goes when it was the last member; an object left empty becomes `{}`.

    Raises:
        KeyError: no object at `path`.
        JsonError: `text` is not valid.
    """
    while True:
        obj = _object_at(text, path, comments)
        members = obj.members or ()
        index = next((i for i in range(len(members) - 1, -1, -1) if members[i].key == key), None)
        if index is None:
            return text
        text = _cut(text, members, index)
        obj = _object_at(text, path, comments)
        inside = text[obj.start + 1 : obj.end - 1]
        if not obj.members and inside and not inside.strip():
            text = text[: obj.start] + "{}" + text[obj.end :]


def _cut(text: str, members: tuple[Member, ...], index: int) -> str:
    member = members[index]
    start, end = member.start, member.end
    previous = members[index - 1].comma if index > 0 else None
    line_start = _line_start(text, member.start)
    alone = not text[line_start : member.start].strip()
    if member.comma is not None:
        end = member.comma + 1
        while not alone and end < len(text) and text[end] in " \t":
            end += 1
    elif previous is not None:
        start = previous  # the comma before the last member goes with it
    if alone and start == member.start:
        start = line_start
        rest = re.match(r"[ \t]*(//[^\n]*)?\n", text[end:])
        if rest is not None:
            end += rest.end()
    return text[:start] + text[end:]
