"""Reading the clients' files: the servers each location lists, and which are off.

A file that does not parse is reported with its line and column and never changed.
What each client writes (checked against the versions named in docs/clients.md):

- Claude Code, `~/.claude.json`: `mcpServers` (user scope) and `projects[PATH].mcpServers`
  (local scope); a project's `.mcp.json`: `mcpServers`. Entries: `type` (stdio, http,
  sse), `command`, `args`, `env`, `url`, `headers`. Servers switched off in a project
  are named in `projects[PATH].disabledMcpServers`, and `.mcp.json` servers refused
  there in `disabledMcpjsonServers`.
- Claude Desktop, Cursor, Windsurf, Gemini CLI: `mcpServers` with `command`, `args`,
  `env` (and `url`, `serverUrl`, `httpUrl`, `headers` for remote servers); Windsurf and
  others may say `"disabled": true`. Gemini also switches servers off in `mcp.excluded`
  of its settings and in `mcp-server-enablement.json` beside them.
- VS Code: `servers` (JSON with comments), `type` stdio, http or sse.
- Codex: TOML tables `[mcp_servers.NAME]` with `command`, `args`, `env`, `env_vars`,
  `url`, `bearer_token_env_var`, `http_headers`, `env_http_headers`, `enabled`.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from assern.app.ctl.clients.jsonc import JsonError, parse
from assern.app.ctl.clients.locations import Location, Syntax

#: The executable names that are assern itself.
ASSERN_NAMES = ("assern", "assern.exe")


@attrs.frozen(kw_only=True)
class ClientFile:
    """One client file as read.

    Attributes:
        path: The file.
        syntax: How it is written.
        text: Its text, or None when it does not exist.
        data: The parsed document (None when absent or invalid).
        error: Why it could not be read or parsed, or None.
    """

    path: Path
    syntax: Syntax
    text: str | None = None
    data: Any = None
    error: str | None = None

    @property
    def exists(self) -> bool:
        return self.text is not None or self.error is not None


@attrs.frozen(kw_only=True)
class ClientServer:
    """One server entry of a client.

    Attributes:
        location: Where it is written.
        name: Its name in the client.
        entry: The entry as the client wrote it.
        disabled: The client has it switched off (here, for this folder).
    """

    location: Location
    name: str
    entry: Mapping[str, Any] = attrs.field(repr=False)
    disabled: bool = False

    @property
    def client(self) -> str:
        return self.location.client


def decode(text: str, syntax: Syntax) -> Any:
    """Parse a client file's text.

    Raises:
        ValueError: not valid JSON, JSONC or TOML; the message says where.
    """
    if syntax == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"invalid TOML: {exc}") from None
    if syntax == "jsonc":
        try:
            return parse(text, comments=True).data
        except JsonError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (at line {exc.lineno}, column {exc.colno})") from None


def read_file(path: Path, syntax: Syntax) -> ClientFile:
    """Read and parse one file (absent is fine: `text` is None)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ClientFile(path=path, syntax=syntax)
    except UnicodeDecodeError:
        return ClientFile(path=path, syntax=syntax, error="not UTF-8 text")
    except OSError as exc:
        return ClientFile(path=path, syntax=syntax, error=f"cannot read it: {exc.strerror or exc}")
    try:
        data = decode(text, syntax)
    except ValueError as exc:
        return ClientFile(path=path, syntax=syntax, text=text, error=str(exc))
    if not isinstance(data, dict):
        return ClientFile(path=path, syntax=syntax, text=text, error="expected an object at the top")
    return ClientFile(path=path, syntax=syntax, text=text, data=data)


def dig(data: Any, key: tuple[str, ...]) -> Any:
    """`data[key[0]][key[1]]...`, or None where a level is missing or not an object."""
    for part in key:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def is_assern(entry: Mapping[str, Any]) -> bool:
    """Whether an entry starts assern's MCP server: `assern serve` (by any path), or
    `uvx assern serve` / `pipx run assern serve`."""
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    words = [os.path.basename(command), *(a for a in args if isinstance(a, str))]
    if words[0] in ("uvx", "pipx"):
        words = [w for w in words[1:] if w != "run" and not w.startswith("-")]
    return bool(words) and os.path.basename(words[0]) in ASSERN_NAMES and "serve" in words[1:]


def _names(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _gemini_enablement(settings: Path) -> set[str]:
    """Servers `gemini mcp disable` switched off (`mcp-server-enablement.json`)."""
    try:
        data = json.loads((settings.parent / "mcp-server-enablement.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict):
        return set()
    return {k for k, v in data.items() if isinstance(v, dict) and v.get("enabled") is False}


def disabled_names(location: Location, file: ClientFile, user: ClientFile | None) -> set[str]:
    """The names the client keeps off at `location`, besides an entry's own flag.

    Args:
        location: The location.
        file: Its file as read.
        user: The client's user-wide file (Gemini's and Claude Code's lists live there).
    """
    if location.client == "claude-code" and location.scope == "project":
        claude = user.data if user is not None else None
        project = dig(claude, ("projects", str(location.root)))
        key = "disabledMcpServers" if location.key[0] == "projects" else "disabledMcpjsonServers"
        return _names(dig(project, (key,)))
    if location.client == "gemini":
        off = _names(dig(file.data, ("mcp", "excluded")))
        if user is not None:
            off |= _names(dig(user.data, ("mcp", "excluded")))
            off |= {name.lower() for name in _gemini_enablement(user.path)}
        return off
    return set()


def _entry_disabled(client: str, entry: Mapping[str, Any]) -> bool:
    if client == "codex":
        return entry.get("enabled") is False
    return entry.get("disabled") is True


def servers_at(
    location: Location, file: ClientFile, user: ClientFile | None = None
) -> tuple[list[ClientServer], list[str]]:
    """The servers listed at `location`, and what is wrong with its entries.

    Returns:
        (the servers in file order, "NAME: problem" lines for entries that are not objects).
    """
    table = dig(file.data, location.key)
    if table is None:
        return [], []
    if not isinstance(table, Mapping):
        return [], [f"{'.'.join(location.key)}: expected an object of servers"]
    off = disabled_names(location, file, user)
    servers, problems = [], []
    for name, entry in table.items():
        if not isinstance(entry, Mapping):
            problems.append(f"{name}: expected an object")
            continue
        disabled = _entry_disabled(location.client, entry) or name in off or name.lower() in off
        servers.append(ClientServer(location=location, name=name, entry=entry, disabled=disabled))
    return servers, problems
