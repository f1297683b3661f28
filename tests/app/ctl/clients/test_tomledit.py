"""The careful editor of Codex's config.toml."""

from __future__ import annotations

import tomllib

import pytest

from assern.app.ctl.clients.tomledit import TomlEditError, blocks, render_table, with_server, without_server

CODEX = '''model = "o3"  # the model

# GitHub
[mcp_servers.github]
command = "npx"

[mcp_servers.github.env]
GITHUB_TOKEN = "x"

# the remote one
[mcp_servers.remote]
url = "https://example.com/mcp"

[projects."/x"]
trust_level = "trusted"
note = """
[mcp_servers.fake]
"""
'''


def test_a_header_inside_a_multiline_string_is_no_header() -> None:
    paths = [block.path for block in blocks(CODEX)]
    assert paths == [
        ("mcp_servers", "github"),
        ("mcp_servers", "github", "env"),
        ("mcp_servers", "remote"),
        ("projects", "/x"),
    ]


def test_removing_a_server_takes_its_subtables_and_its_comment() -> None:
    edited = without_server(CODEX, "github")
    assert edited == CODEX.replace(
        '# GitHub\n[mcp_servers.github]\ncommand = "npx"\n\n[mcp_servers.github.env]\nGITHUB_TOKEN = "x"\n\n',
        "",
    )
    assert "# the remote one" in edited
    assert without_server(CODEX, "absent") == CODEX


def test_adding_a_server_after_the_others_and_again_is_no_change() -> None:
    table = {"command": "/bin/assern", "args": ["serve"], "env": {"ASSERN_HOME": "/h"}, "env_vars": ["A"]}
    edited = with_server(CODEX, "assern", table)
    assert (
        '[mcp_servers.remote]\nurl = "https://example.com/mcp"\n\n[mcp_servers.assern]\n'
        'command = "/bin/assern"\nargs = ["serve"]\nenv = { ASSERN_HOME = "/h" }\nenv_vars = ["A"]\n\n'
        '[projects."/x"]' in edited
    )
    assert tomllib.loads(edited)["mcp_servers"]["assern"] == table
    assert with_server(edited, "assern", table) == edited


def test_replacing_a_server_and_adding_to_an_empty_file() -> None:
    changed = with_server(CODEX, "remote", {"url": "https://other/mcp"})
    assert tomllib.loads(changed)["mcp_servers"]["remote"] == {"url": "https://other/mcp"}
    assert (
        with_server("", "a", {"command": "x"}, comment="hello") == '# hello\n[mcp_servers.a]\ncommand = "x"\n'
    )


def test_a_server_written_inline_is_refused() -> None:
    with pytest.raises(TomlEditError, match="form this editor does not change"):
        without_server('[mcp_servers]\nx = { command = "a" }\n', "x")
    with pytest.raises(TomlEditError, match="not a table"):
        with_server("mcp_servers = 1\n", "x", {})


def test_render_quotes_what_needs_quotes() -> None:
    text = render_table(("servers", "my server"), {"env": {"A-B": 'x"y', "c d": "é\n"}, "on": True, "t": 1.5})
    assert tomllib.loads(text) == {
        "servers": {"my server": {"env": {"A-B": 'x"y', "c d": "é\n"}, "on": True, "t": 1.5}}
    }
