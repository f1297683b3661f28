"""Undefined references found in a raw config document, where resolution cannot run."""

from __future__ import annotations

from assern.actors.config.variables import undefined_references

LOOKUP = {"HOME": "/home/u", "TOKEN": "t"}


def test_every_expanded_field_of_every_server_table_is_read() -> None:
    document = {
        "servers": {
            "a": {
                "command": "${CMD}",
                "url": "https://${HOST}/mcp",
                "cwd": "$HOME/x",
                "args": ["--token", "${TOKEN}", "${ARG}", 5],
                "headers": {"Authorization": "Bearer ${SECRET}"},
                "env": {"A": "${A_OWN:-x}", "B": "${A}", "C": "${MISSING}", "D": "$$5"},
                "max_restarts": "five",
            },
            "b": "not a table",
        },
        "projects": {"p": {"servers": {"c": {"command": "${PROJECT_CMD}"}}}, "q": ["x"]},
    }
    problems = undefined_references(document, LOOKUP)
    paths = [problem.rsplit(" @ ", 1)[1] for problem in problems]
    assert paths == [
        "servers.a.command",
        "servers.a.url",
        "servers.a.args[2]",
        "servers.a.headers.Authorization",
        "servers.a.env.C",
        "projects.p.servers.c.command",
    ]
    assert all("undefined variable" in problem for problem in problems)


def test_a_document_without_servers_has_none() -> None:
    assert undefined_references({}, LOOKUP) == []
    assert undefined_references({"servers": [1, 2]}, LOOKUP) == []
