"""A minimal, careful editor for Codex's `config.toml`: remove or add `[mcp_servers.NAME]`.

The file is edited as lines, never re-dumped, so its other tables, their order, the
comments and the blank lines stay as they were. A table header counts only where the
text before it is valid TOML on its own (so a `[x]` line inside a multi-line string is
not taken for one). A server's block is its header, the comment lines just above it,
and every line up to the next block; its subtables (`[mcp_servers.NAME.env]`) go with
it. Every edit is checked by parsing the result: it must be the original document with
exactly that server removed or set, or the edit is refused (a server written in a form
this editor does not touch, such as an inline table under `[mcp_servers]`).
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import attrs

_HEADER = re.compile(r"^[ \t]*\[(?!\[)(?P<key>[^\n]*?)\][ \t]*(#[^\n]*)?$")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: The table that holds Codex's servers.
SERVERS = "mcp_servers"


class TomlEditError(ValueError):
    """The edit cannot be made safely; the file is to be left as it is."""


@attrs.frozen
class Block:
    """Lines `[start, end)` of a table: its leading comments, header and body."""

    path: tuple[str, ...]
    start: int
    end: int


def _header_path(key: str) -> tuple[str, ...] | None:
    try:
        document = tomllib.loads(f"[{key}]\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    node: Any = document
    while isinstance(node, dict) and len(node) == 1:
        name = next(iter(node))
        path.append(name)
        node = node[name]
    return tuple(path)


def blocks(text: str) -> list[Block]:
    """The tables of `text` in order, each with its lines (see the module's docstring)."""
    lines = text.splitlines(keepends=True)
    headers: list[tuple[int, tuple[str, ...]]] = []
    offset = 0
    for index, line in enumerate(lines):
        match = _HEADER.match(line.rstrip("\r\n"))
        if match is not None and (path := _header_path(match.group("key"))) is not None:
            try:
                tomllib.loads(text[:offset])
            except tomllib.TOMLDecodeError:
                pass  # inside a multi-line string or array: not a header
            else:
                headers.append((index, path))
        offset += len(line)
    found: list[Block] = []
    for position, (index, path) in enumerate(headers):
        start = index
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        if found and start < found[-1].end:
            start = index
        end = len(lines)
        if position + 1 < len(headers):
            following = headers[position + 1][0]
            end = following
            while end > index + 1 and lines[end - 1].lstrip().startswith("#"):
                end -= 1
        found.append(Block(path, start, end))
    return found


def _server_blocks(text: str, name: str, parent: str) -> list[Block]:
    return [b for b in blocks(text) if b.path[:2] == (parent, name)]


def _drop_lines(text: str, spans: list[tuple[int, int]]) -> str:
    lines = text.splitlines(keepends=True)
    for start, end in sorted(spans, reverse=True):
        del lines[start:end]
        # Keep the file's rhythm: no two blank lines where the block was.
        if 0 < start < len(lines) and not lines[start - 1].strip() and not lines[start].strip():
            del lines[start]
        elif start == len(lines) and start > 0 and not lines[start - 1].strip():
            del lines[start - 1]
    return "".join(lines)


def _expect(text: str, expected: dict[str, Any]) -> str:
    try:
        got = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlEditError(f"the edit would not be valid TOML ({exc})") from None
    if got != expected:
        raise TomlEditError("the servers are written in a form this editor does not change")
    return text


def without_server(text: str, name: str, *, parent: str = SERVERS) -> str:
    """`text` without `[PARENT.NAME]` (`[mcp_servers.NAME]`) and its subtables.

    Raises:
        TomlEditError: the server is defined some other way (the result would still hold it).
    """
    original = tomllib.loads(text)
    servers = original.get(parent)
    if not isinstance(servers, dict) or name not in servers:
        return text
    edited = _drop_lines(text, [(b.start, b.end) for b in _server_blocks(text, name, parent)])
    expected = {**original, parent: {k: v for k, v in servers.items() if k != name}}
    if not expected[parent] and parent not in tomllib.loads(edited):
        del expected[parent]
    return _expect(edited, expected)


def with_server(
    text: str, name: str, table: dict[str, Any], *, parent: str = SERVERS, comment: str | None = None
) -> str:
    """`text` with `[PARENT.NAME]` (`[mcp_servers.NAME]`) set to `table`, replacing any.

    The table goes after the last `[PARENT.*]` block, else at the end of the file, with
    `comment` (a `# ...` line) above it.

    Raises:
        TomlEditError: the result would not be the document with exactly this change.
    """
    original = tomllib.loads(text)
    servers = original.get(parent, {})
    if not isinstance(servers, dict):
        raise TomlEditError(f"`{parent}` is not a table")
    if servers.get(name) == table:
        return text
    if name in servers:
        text = without_server(text, name, parent=parent)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    ours = [b for b in blocks(text) if b.path[:1] == (parent,) and len(b.path) > 1]
    at = ours[-1].end if ours else len(lines)
    while at > 0 and not lines[at - 1].strip():
        at -= 1
    rendered = ("" if comment is None else f"# {comment}\n") + render_table((parent, name), table)
    before = "\n" if at > 0 else ""
    after = "\n" if at < len(lines) and lines[at].strip() else ""
    edited = "".join(lines[:at]) + before + rendered + after + "".join(lines[at:])
    return _expect(edited, {**original, parent: {**servers, name: table}})


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # A JSON string is a TOML basic string: the same escapes, control characters escaped.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def render_table(path: tuple[str, ...], table: dict[str, Any]) -> str:
    """`[a.b]` and its keys, tables of strings inline (`env = { K = "v" }`), as Codex writes."""
    header = ".".join(_key(part) for part in path)
    return f"[{header}]\n" + "".join(f"{_key(k)} = {_value(v)}\n" for k, v in table.items())
