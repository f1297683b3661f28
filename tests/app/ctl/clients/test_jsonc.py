"""The JSON/JSONC reader with places, and the two in-place edits."""

from __future__ import annotations

import json

import pytest

from assern.app.ctl.clients.jsonc import JsonError, parse, with_member, without_member

VSCODE = """// servers
{
  "servers": {
    /* one */
    "a": {"command": "x"},
    "b": {"command": "y"}, // trailing comment
  },
  "inputs": [],
}
"""


def test_parse_gives_the_data_and_the_places() -> None:
    node = parse('{"a": [1, {"b": null}], "c": "d\\u00e9"}')
    assert node.data == {"a": [1, {"b": None}], "c": "dé"}
    member = node.member("c")
    assert member is not None
    assert '{"a": [1, {"b": null}], "c": "d\\u00e9"}'[member.value.start : member.value.end] == '"d\\u00e9"'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1,}', "a trailing comma is not allowed here (at line 1, column 9)"),
        ('{"a": 1 // no\n}', "comments are not allowed in this file (at line 1, column 9)"),
        ('{"a" 1}', "expected ':' after the key (at line 1, column 6)"),
        ('{"a": 1} x', "unexpected text after the document (at line 1, column 10)"),
        ('{"a": "x\n"}', "unterminated string (at line 1, column 7)"),
        ("{'a': 1}", "expected a key in double quotes (at line 1, column 2)"),
        ('{"a": 1 "b": 2}', "expected ',' or '}' (at line 1, column 9)"),
        ("", "expected a value, got the end of the file (at line 1, column 1)"),
    ],
)
def test_invalid_json_says_what_and_where(text: str, message: str) -> None:
    with pytest.raises(JsonError) as caught:
        parse(text)
    assert str(caught.value) == message


def test_jsonc_allows_comments_and_trailing_commas() -> None:
    assert parse(VSCODE, comments=True).data == {
        "servers": {"a": {"command": "x"}, "b": {"command": "y"}},
        "inputs": [],
    }
    with pytest.raises(JsonError):
        parse("/* open", comments=True)


def test_removing_a_member_keeps_comments_and_the_rest() -> None:
    edited = without_member(VSCODE, ("servers",), "a", comments=True)
    assert edited == VSCODE.replace('    "a": {"command": "x"},\n', "")
    assert parse(edited, comments=True).data["servers"] == {"b": {"command": "y"}}


def test_removing_the_last_member_takes_the_comma_before_it() -> None:
    text = '{\n  "mcpServers": {\n    "a": 1,\n    "b": 2\n  },\n  "x": true\n}\n'
    assert (
        without_member(text, ("mcpServers",), "b")
        == '{\n  "mcpServers": {\n    "a": 1\n  },\n  "x": true\n}\n'
    )
    assert without_member('{"m": {"a": 1, "b": 2}}', ("m",), "a") == '{"m": {"b": 2}}'
    assert without_member('{"m": {"a": 1, "b": 2}}', ("m",), "b") == '{"m": {"a": 1}}'


def test_an_object_left_empty_becomes_braces() -> None:
    text = '{\n  "mcpServers": {\n    "a": 1\n  }\n}\n'
    assert without_member(text, ("mcpServers",), "a") == '{\n  "mcpServers": {}\n}\n'
    assert without_member(text, ("mcpServers",), "zzz") == text


def test_adding_follows_the_files_layout() -> None:
    text = '{\n    "mcpServers": {\n        "a": 1\n    }\n}\n'
    added = with_member(text, ("mcpServers",), "assern", {"command": "/x/assern", "args": ["serve"]})
    assert added == (
        '{\n    "mcpServers": {\n        "a": 1,\n        "assern": {\n            "command": "/x/assern",\n'
        '            "args": [\n                "serve"\n            ]\n        }\n    }\n}\n'
    )
    assert with_member('{"m": {"a": 1}}', ("m",), "b", [2]) == '{"m": {"a": 1, "b": [2]}}'
    assert with_member('{"m": {}}', ("m",), "b", 2) == '{"m": {"b": 2}}'


def test_adding_after_a_trailing_comma_keeps_it_valid_jsonc() -> None:
    added = with_member(VSCODE, ("servers",), "assern", {"command": "a"}, comments=True)
    assert parse(added, comments=True).data["servers"]["assern"] == {"command": "a"}
    assert "// trailing comment" in added
    assert "/* one */" in added


def test_adding_to_an_object_holding_only_a_comment_keeps_the_comment() -> None:
    text = '{\n  "servers": {\n    // none yet\n  }\n}\n'
    added = with_member(text, ("servers",), "a", 1, comments=True)
    assert added == '{\n  "servers": {\n    // none yet\n    "a": 1\n  }\n}\n'


def test_adding_a_missing_object_and_replacing_a_value() -> None:
    added = with_member('{\n  "x": 1\n}\n', (), "mcpServers", {"assern": {}})
    assert json.loads(added) == {"x": 1, "mcpServers": {"assern": {}}}
    replaced = with_member('{"m": {"a": 1, "b": 2}}', ("m",), "a", "new")
    assert replaced == '{"m": {"a": "new", "b": 2}}'
    with pytest.raises(KeyError):
        with_member('{"m": 1}', ("m",), "a", 1)
