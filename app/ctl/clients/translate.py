"""One client's server entry as an assern `[servers.NAME]` table.

Pure. Each client has its own way of referring to a variable, and assern has its own
(`${VAR}`, `$VAR`, `${VAR:-default}`, `$$` for a `$`), so every string is rewritten:

- Claude Code: `${VAR}` and `${VAR:-default}` are kept.
- Gemini CLI: `$VAR` and `${VAR}` are kept.
- Cursor, VS Code, Windsurf: `${env:VAR}` becomes `${VAR}`, `${userHome}` `${HOME}`,
  `${workspaceFolder}` the project's folder; VS Code's `${input:ID}` (a value it asks
  for) becomes a variable to set in the .env file.
- Claude Desktop and Codex expand nothing: every `$` is written `$$`.

A `$` that is no reference in the client's syntax is written `$$`, so assern reads the
same text the client did. Literal `env` and `headers` values (no reference) are listed
in `literals`, so that the import can move secrets out of the config file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from pathlib import Path

    from assern.app.ctl.clients.formats import ClientServer

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


class Untranslatable(ValueError):
    """A value uses something assern cannot express (an unknown `${...}` variable)."""


@attrs.frozen(kw_only=True)
class Translated:
    """The assern table of one client entry.

    Attributes:
        table: The `[servers.NAME]` table (only the keys it sets).
        literals: (field, key) of the `env` and `headers` values written without any
            reference: candidates to move into the .env file.
        notes: What was not carried over or needs the user (key names, never values).
        problem: Why the entry cannot be imported at all, or None.
    """

    table: dict[str, Any] = attrs.field(factory=dict, repr=False)
    literals: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    problem: str | None = None


@attrs.frozen
class _Converted:
    text: str
    literal: bool
    notes: tuple[str, ...] = ()


def _escape(text: str) -> str:
    return text.replace("$", "$$")


#: A replacement: (assern's text, whether it refers to a variable, a note or None).
_Replacement = tuple[str, bool, str | None]


def _convert(
    text: str, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], _Replacement]
) -> _Converted:
    out, literal, position, notes = [], True, 0, []
    for match in pattern.finditer(text):
        out.append(_escape(text[position : match.start()]))
        replaced, reference, note = replace(match)
        literal = literal and not reference
        if note is not None:
            notes.append(note)
        out.append(replaced)
        position = match.end()
    out.append(_escape(text[position:]))
    return _Converted("".join(out), literal, tuple(notes))


_CLAUDE = re.compile(r"\$\{(" + _NAME + r")(:-([^}]*))?\}")
_GEMINI = re.compile(r"\$\{(" + _NAME + r")\}|\$(" + _NAME + ")")
_EDITOR = re.compile(r"\$\{([^}]*)\}")


def _claude(match: re.Match[str]) -> _Replacement:
    name, default = match.group(1), match.group(3)
    text = f"${{{name}}}" if default is None else f"${{{name}:-{_escape(default)}}}"
    return text, True, None


def _gemini(match: re.Match[str]) -> _Replacement:
    return f"${{{match.group(1) or match.group(2)}}}", True, None


def input_variable(identifier: str) -> str:
    """The .env variable for VS Code's `${input:ID}`: ID in capitals, `_` for the rest."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", identifier).strip("_").upper() or "INPUT"
    return name if not name[0].isdigit() else f"_{name}"


def _editor(root: Path | None) -> Callable[[re.Match[str]], _Replacement]:
    def replace(match: re.Match[str]) -> _Replacement:
        body = match.group(1)
        if body.startswith("env:") and re.fullmatch(_NAME, body[4:]):
            return f"${{{body[4:]}}}", True, None
        if body == "userHome":
            return "${HOME}", False, None
        if body in ("pathSeparator", "/"):
            return "/", False, None
        if body in ("workspaceFolder", "workspaceRoot") and root is not None:
            return _escape(str(root)), False, None
        if body == "workspaceFolderBasename" and root is not None:
            return _escape(root.name), False, None
        if body.startswith("input:"):
            variable = input_variable(body[6:])
            note = f"the value the client asks for (${{{body}}}) is ${{{variable}}}: set it in the .env file"
            return f"${{{variable}}}", True, note
        raise Untranslatable(f"the variable ${{{body}}} has no equivalent in assern")

    return replace


def converter(client: str, root: Path | None) -> Callable[[str], _Converted]:
    """How `client`'s strings become assern's (see the module's docstring)."""
    if client == "claude-code":
        return lambda text: _convert(text, _CLAUDE, _claude)
    if client == "gemini":
        return lambda text: _convert(text, _GEMINI, _gemini)
    if client in ("cursor", "vscode", "windsurf"):
        replace = _editor(root)
        return lambda text: _convert(text, _EDITOR, replace)
    return lambda text: _Converted(_escape(text), True)


#: Keys each client's entry may hold that the table carries over (the rest is noted).
_TIMEOUT_KEYS = {"timeout", "startup_timeout_sec", "tool_timeout_sec"}
_KNOWN = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "httpUrl",
    "headers",
    "http_headers",
    "env_http_headers",
    "bearer_token_env_var",
    "env_vars",
    "type",
    "transport",
    "disabled",
    "enabled",
    "includeTools",
    "excludeTools",
    "enabled_tools",
    "disabled_tools",
    "disabledTools",
    *_TIMEOUT_KEYS,
}
#: Keys that describe the client's own handling and mean nothing to assern.
_CLIENT_ONLY = {"description", "trust", "required", "autoApprove", "alwaysAllow"}


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _string_map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    return dict(value) if all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()) else None


def _transport(entry: Mapping[str, Any], client: str, url: str) -> str | None:
    kind = entry.get("type", entry.get("transport"))
    if kind == "sse":
        return "sse"
    if kind in ("http", "streamable-http", "streamableHttp", "streamable_http"):
        return "streamable-http"
    if client == "gemini" and "httpUrl" not in entry and kind is None:
        return "sse"  # Gemini's `url` without a type is SSE; `httpUrl` is streamable HTTP
    if kind is None and url.rstrip("/").endswith("/sse"):
        return "sse"
    return None


def translate(server: ClientServer) -> Translated:
    """The assern table for one client entry (see the module's docstring).

    Never raises: an entry that cannot be expressed comes back with `problem` set.
    """
    entry, client = server.entry, server.client
    convert = converter(client, server.location.root)
    notes: list[str] = []
    table: dict[str, Any] = {}
    literals: list[tuple[str, str]] = []

    def text(key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise Untranslatable(f"`{key}` is not a string")
        converted = convert(value)
        notes.extend(converted.notes)
        return converted.text

    def mapping(field: str, source: str, values: Any) -> None:
        found = _string_map(values)
        if found is None:
            raise Untranslatable(f"`{source}` is not an object of strings")
        for key, value in found.items():
            converted = convert(value)
            notes.extend(converted.notes)
            table.setdefault(field, {})[key] = converted.text
            if converted.literal:
                literals.append((field, key))

    try:
        url = entry.get("url") or entry.get("serverUrl") or entry.get("httpUrl")
        if entry.get("command") is not None:
            table["command"] = text("command", entry["command"])
            if entry.get("args") is not None:
                args = _strings(entry["args"])
                if args is None:
                    raise Untranslatable("`args` is not a list of strings")
                table["args"] = [text("args", a) for a in args]
        elif url is not None:
            table["url"] = text("url", url)
            transport = _transport(entry, client, str(url))
            if transport is not None:
                table["transport"] = transport
        else:
            raise Untranslatable("it has neither `command` nor a URL")
        if entry.get("env") is not None:
            mapping("env", "env", entry["env"])
        for name in _strings(entry.get("env_vars")) or []:  # Codex: passed from the environment
            table.setdefault("env", {})[name] = f"${{{name}}}"
        if entry.get("cwd") is not None:
            table["cwd"] = text("cwd", entry["cwd"])
        for source in ("headers", "http_headers"):
            if entry.get(source) is not None:
                mapping("headers", source, entry[source])
        for header, variable in (_string_map(entry.get("env_http_headers")) or {}).items():
            table.setdefault("headers", {})[header] = f"${{{variable}}}"
        bearer = entry.get("bearer_token_env_var")
        if isinstance(bearer, str):
            table.setdefault("headers", {})["Authorization"] = f"Bearer ${{{bearer}}}"
    except Untranslatable as exc:
        return Translated(problem=str(exc))
    _options(entry, table, notes)
    if server.disabled:
        table["disabled"] = True
    left = sorted(k for k in entry if k not in _KNOWN and k not in _CLIENT_ONLY)
    if left:
        notes.append("not carried over: " + ", ".join(left))
    return Translated(table=table, literals=tuple(literals), notes=tuple(notes))


def _options(entry: Mapping[str, Any], table: dict[str, Any], notes: list[str]) -> None:
    """Tool lists and timeouts, where the client has them."""
    allowed = _strings(entry.get("includeTools")) or _strings(entry.get("enabled_tools"))
    if allowed:
        table["allowed"] = allowed
    deny = (
        _strings(entry.get("excludeTools"))
        or _strings(entry.get("disabled_tools"))
        or _strings(entry.get("disabledTools"))
    )
    if deny:
        table["deny"] = deny
    seconds = {
        "timeout": entry.get("tool_timeout_sec"),
        "startup_timeout": entry.get("startup_timeout_sec"),
    }
    if isinstance(entry.get("timeout"), int | float) and not isinstance(entry.get("timeout"), bool):
        seconds["timeout"] = entry["timeout"] / 1000  # Gemini's is in milliseconds
    for key, value in seconds.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            table[key] = float(value)
    if entry.get("type") == "stdio" or entry.get("type") is None:
        return
    if entry.get("type") not in ("http", "sse", "streamable-http", "streamableHttp", "streamable_http"):
        notes.append(f"unknown type {entry.get('type')!r}")


def launch(table: Mapping[str, Any]) -> tuple[str, ...]:
    """What identifies a server across files: its command and args, or its URL."""
    if table.get("command") is not None:
        return ("command", str(table["command"]), *(str(a) for a in table.get("args") or ()))
    return ("url", str(table.get("url")))
