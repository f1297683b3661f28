"""Client entries as assern tables: each client's variable syntax, transports, options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assern.app.ctl.clients.formats import ClientServer, is_assern
from assern.app.ctl.clients.locations import ClientName, Location
from assern.app.ctl.clients.translate import Translated, input_variable, launch, translate


def _translate(
    client: ClientName, entry: dict[str, Any], *, root: Path | None = None, disabled: bool = False
) -> Translated:
    location = Location(
        client=client,
        path=Path("/f"),
        scope="project" if root else "user",
        key=("mcpServers",),
        syntax="json",
        root=root,
    )
    return translate(ClientServer(location=location, name="s", entry=entry, disabled=disabled))


def test_claude_code_keeps_its_references_and_escapes_other_dollars() -> None:
    got = _translate(
        "claude-code",
        {
            "type": "stdio",
            "command": "npx",
            "args": ["${ROOT:-/srv/$x}", "$HOME"],
            "env": {"K": "${K}", "L": "lit"},
        },
    )
    assert got.table == {
        "command": "npx",
        "args": ["${ROOT:-/srv/$$x}", "$$HOME"],
        "env": {"K": "${K}", "L": "lit"},
    }
    assert got.literals == (("env", "L"),)


def test_gemini_references_and_milliseconds() -> None:
    got = _translate(
        "gemini", {"command": "x", "env": {"A": "$TOKEN", "B": "${B}x"}, "timeout": 30000, "trust": True}
    )
    assert got.table == {"command": "x", "env": {"A": "${TOKEN}", "B": "${B}x"}, "timeout": 30.0}
    assert got.literals == ()
    assert got.notes == ()


def test_editor_variables() -> None:
    root = Path("/w/app")
    got = _translate(
        "vscode",
        {
            "command": "${userHome}/bin/x",
            "args": ["${workspaceFolder}/data", "${env:TOKEN}"],
            "env": {"K": "${input:api-key}"},
        },
        root=root,
    )
    assert got.table == {
        "command": "${HOME}/bin/x",
        "args": ["/w/app/data", "${TOKEN}"],
        "env": {"K": "${API_KEY}"},
    }
    assert got.notes == (
        "the value the client asks for (${input:api-key}) is ${API_KEY}: set it in the .env file",
    )
    unknown = _translate("cursor", {"command": "x", "args": ["${command:pick}"]})
    assert unknown.problem == "the variable ${command:pick} has no equivalent in assern"
    no_folder = _translate("cursor", {"command": "x", "args": ["${workspaceFolder}"]})
    assert no_folder.problem is not None


def test_clients_that_expand_nothing_get_every_dollar_escaped() -> None:
    got = _translate("claude-desktop", {"command": "x", "args": ["$USD"], "env": {"P": "a$b"}})
    assert got.table == {"command": "x", "args": ["$$USD"], "env": {"P": "a$$b"}}
    assert got.literals == (("env", "P"),)


def test_codex_fields() -> None:
    got = _translate(
        "codex",
        {
            "command": "x",
            "env_vars": ["GITHUB_TOKEN"],
            "enabled": False,
            "tool_timeout_sec": 30,
            "startup_timeout_sec": 20,
            "enabled_tools": ["a"],
            "disabled_tools": ["b"],
        },
        disabled=True,
    )
    assert got.table == {
        "command": "x",
        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
        "allowed": ["a"],
        "deny": ["b"],
        "timeout": 30.0,
        "startup_timeout": 20.0,
        "disabled": True,
    }
    remote = _translate(
        "codex",
        {
            "url": "https://r/mcp",
            "bearer_token_env_var": "TOK",
            "env_http_headers": {"X-K": "KV"},
            "http_headers": {"X-A": "a"},
        },
    )
    assert remote.table == {
        "url": "https://r/mcp",
        "headers": {"X-A": "a", "X-K": "${KV}", "Authorization": "Bearer ${TOK}"},
    }
    assert remote.literals == (("headers", "X-A"),)


@pytest.mark.parametrize(
    ("client", "entry", "transport"),
    [
        ("claude-code", {"type": "http", "url": "https://a/mcp"}, "streamable-http"),
        ("claude-code", {"type": "sse", "url": "https://a/sse"}, "sse"),
        ("cursor", {"url": "https://a/sse"}, "sse"),
        ("cursor", {"url": "https://a/mcp"}, None),
        ("windsurf", {"serverUrl": "https://a/mcp"}, None),
        ("gemini", {"url": "https://a/events"}, "sse"),
        ("gemini", {"httpUrl": "https://a/mcp"}, None),
        ("vscode", {"type": "http", "url": "https://a/mcp"}, "streamable-http"),
    ],
)
def test_remote_transports(client: ClientName, entry: dict[str, Any], transport: str | None) -> None:
    table = _translate(client, entry).table
    assert table.get("transport") == transport
    assert table["url"] == entry.get("url", entry.get("serverUrl", entry.get("httpUrl")))


def test_entries_that_cannot_be_imported_and_keys_left_behind() -> None:
    assert _translate("cursor", {"args": ["x"]}).problem == "it has neither `command` nor a URL"
    assert _translate("cursor", {"command": "x", "args": "y"}).problem == "`args` is not a list of strings"
    assert (
        _translate("cursor", {"command": "x", "env": {"A": 1}}).problem == "`env` is not an object of strings"
    )
    left = _translate("cursor", {"command": "x", "envFile": ".env", "oauth": {}})
    assert left.notes == ("not carried over: envFile, oauth",)


def test_launch_and_is_assern() -> None:
    assert launch({"command": "npx", "args": ["-y", "a"]}) == ("command", "npx", "-y", "a")
    assert launch({"url": "https://a"}) == ("url", "https://a")
    assert is_assern({"command": "/home/me/.venv/bin/assern", "args": ["serve"]})
    assert is_assern({"command": "uvx", "args": ["assern", "serve"]})
    assert is_assern({"command": "pipx", "args": ["run", "assern", "serve", "--project", "x"]})
    assert not is_assern({"command": "assern", "args": ["list"]})
    assert not is_assern({"command": "npx", "args": ["serve"]})
    assert input_variable("perplexity-key") == "PERPLEXITY_KEY"
    assert input_variable("1x") == "_1X"
