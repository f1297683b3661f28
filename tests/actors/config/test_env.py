"""The pure env functions: expand_vars, parse_dotenv, merge_env."""

from __future__ import annotations

import pytest

from assern.actors.config.env import (
    ExpansionError,
    UndefinedVariableError,
    expand_vars,
    merge_env,
    parse_dotenv,
)
from assern.actors.config.spec import ConfigError

LOOKUP = {"HOME": "/home/u", "DOMAIN": "example.com", "EMPTY": "", "A_1": "x"}


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("plain", "plain"),
        ("${HOME}/bin", "/home/u/bin"),
        ("$HOME/bin", "/home/u/bin"),
        ("https://${DOMAIN}/api", "https://example.com/api"),
        ("$A_1-$A_1", "x-x"),
        ("${A_1}B", "xB"),
        ("$A_1B", None),  # $NAME takes the longest name: A_1B is undefined
        ("${MISSING:-fallback}", "fallback"),
        ("${DOMAIN:-fallback}", "example.com"),
        ("${EMPTY:-fallback}", "fallback"),  # :- also replaces an empty value
        ("${EMPTY}", ""),
        ("${MISSING:-}", ""),
        ("${MISSING:-${DOMAIN}}", "example.com"),  # a default may itself expand
        ("${DOMAIN:-${MISSING}}", "example.com"),  # an unused default is not expanded
        ("$$", "$"),
        ("$${HOME}", "${HOME}"),
        ("cost: $$5 and $5", "cost: $5 and $5"),  # a $ starting no name stays
        ("trailing $", "trailing $"),
    ],
)
def test_expand_vars(text: str, expanded: str | None) -> None:
    """${VAR}, $VAR and ${VAR:-default} expand; $$ is a literal $."""
    if expanded is None:
        with pytest.raises(UndefinedVariableError):
            expand_vars(text, LOOKUP)
    else:
        assert expand_vars(text, LOOKUP) == expanded


def test_undefined_variable_names_every_variable() -> None:
    """An undefined variable is an error naming it, never an empty string."""
    with pytest.raises(UndefinedVariableError) as caught:
        expand_vars("${TOKEN} $OTHER ${TOKEN} $HOME", LOOKUP)
    assert caught.value.names == ("TOKEN", "OTHER")
    assert "'TOKEN', 'OTHER'" in str(caught.value)


@pytest.mark.parametrize("text", ["${HOME", "${}", "${1X}", "${HOME:?oops}", "${HOME-x}"])
def test_malformed_reference(text: str) -> None:
    """A malformed ${...} is an ExpansionError, not a silent pass-through."""
    with pytest.raises(ExpansionError):
        expand_vars(text, LOOKUP)


def test_merge_env_overlay_vector() -> None:
    """Design vector: overlay keeps the server's other keys, the project's keys win."""
    server = {"TOKEN": "global", "OTHER": "value"}
    assert merge_env(server, {"TOKEN": "project"}, "overlay") == {
        "TOKEN": "project",
        "OTHER": "value",
    }


def test_merge_env_replace_vector() -> None:
    """Design vector: replace drops the server env for the project's."""
    server = {"TOKEN": "global", "OTHER": "value"}
    assert merge_env(server, {"TOKEN": "project"}, "replace") == {"TOKEN": "project"}


@pytest.mark.parametrize("mode", ["overlay", "replace"])
def test_merge_env_without_project_env_keeps_server_env(mode: str) -> None:
    """No project env (None) leaves the server env as it is, in both modes."""
    server = {"TOKEN": "global"}
    assert merge_env(server, None, mode) == server  # type: ignore[arg-type]  # mode: a str from parametrize


def test_merge_env_does_not_mutate_and_rejects_bad_mode() -> None:
    server, project = {"A": "1"}, {"B": "2"}
    merged = merge_env(server, project, "overlay")
    merged["C"] = "3"
    assert server == {"A": "1"}
    assert project == {"B": "2"}
    with pytest.raises(ValueError, match="expected one of 'overlay', 'replace'"):
        merge_env(server, project, "both")  # type: ignore[arg-type]  # a wrong mode on purpose


def test_parse_dotenv() -> None:
    """KEY=VALUE lines with comments, quotes and the export prefix."""
    text = """\ufeff# a comment
PLAIN=value
  SPACED  =  padded value  \t
export EXPORTED=yes
EMPTY=
INLINE=abc # a comment
HASH=abc#def
SINGLE='literal ${NOT} $$ \\n # kept'
DOUBLE="line\\nbreak \\"quoted\\" \\$x" # trailing comment
MULTI="first
second"
URL=https://example.com/?a=b
PLAIN=overridden
"""
    assert parse_dotenv(text) == {
        "PLAIN": "overridden",
        "SPACED": "padded value",
        "EXPORTED": "yes",
        "EMPTY": "",
        "INLINE": "abc",
        "HASH": "abc#def",
        "SINGLE": "literal ${NOT} $$ \\n # kept",
        "DOUBLE": 'line\nbreak "quoted" $x',
        "MULTI": "first\nsecond",
        "URL": "https://example.com/?a=b",
    }


def test_parse_dotenv_takes_values_literally() -> None:
    """No expansion in .env files: a $ stays a $."""
    assert parse_dotenv("A=$HOME/${X}") == {"A": "$HOME/${X}"}


def test_parse_dotenv_reports_every_bad_line() -> None:
    """All bad lines are listed with their line numbers and the file."""
    text = "GOOD=1\nnot an assignment\n1BAD=2\nQ='unterminated\n"
    with pytest.raises(ConfigError) as caught:
        parse_dotenv(text, file="/x/.env")
    assert caught.value.file == "/x/.env"
    assert caught.value.problems == (
        "expected KEY=VALUE @ line 2",
        "expected KEY=VALUE @ line 3",
        "unterminated ' quote @ line 4",
    )
    assert str(caught.value).splitlines()[0] == "/x/.env: expected KEY=VALUE @ line 2"


def test_parse_dotenv_text_after_closing_quote() -> None:
    with pytest.raises(ConfigError, match="unexpected text after the closing quote @ line 1"):
        parse_dotenv('A="x" y')
