"""The redactor: secrets by key and by shape, in arguments, text, JSON text and
structured results; nothing else touched."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from assern.actors.gate.middleware import Call
from assern.actors.gate.middlewares.redact import BUILTIN, factory

GITHUB = "ghp_" + "a1B2" * 9
AWS = "AKIA" + "ABCDEFGHIJKLMNOP"


def text_result(*texts: str, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=t) for t in texts], structured_content=structured
    )


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def test_builtin_shapes_are_found_in_any_text() -> None:
    redactor = factory({}).redactor
    cases = {
        f"token {GITHUB} end": "token [REDACTED] end",
        f"key={AWS}": "key=[REDACTED]",
        "Authorization: Bearer abcdefghijklmnop1234.xyz": "Authorization: [REDACTED]",
        "sk-ant-" + "x" * 30: "[REDACTED]",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----": "[REDACTED]",
        "nothing secret here, sk-short": "nothing secret here, sk-short",
    }
    for given, expected in cases.items():
        assert redactor.text(given)[0] == expected
    assert set(BUILTIN) >= {"github_token", "aws_access_key_id", "private_key", "jwt"}


def test_keys_are_globs_without_case_and_reach_into_nested_values() -> None:
    redactor = factory({"keys": ["password", "*TOKEN*"], "builtin": False}).redactor
    value = {
        "user": "ann",
        "Password": "hunter2",
        "auth": {"access_token": "abc", "scopes": ["read"]},
        "items": [{"refresh_token": "def", "id": 3}],
        "token_count": None,
    }
    redacted, count = redactor.value(value)
    assert count == 3
    assert redacted == {
        "user": "ann",
        "Password": "[REDACTED]",
        "auth": {"access_token": "[REDACTED]", "scopes": ["read"]},
        "items": [{"refresh_token": "[REDACTED]", "id": 3}],
        "token_count": None,
    }


def test_a_result_is_redacted_in_text_json_text_resources_and_structured_content() -> None:
    redactor = factory({"keys": ["secret"], "patterns": ["corp-[0-9]{4}"], "replacement": "***"}).redactor
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="id corp-1234 and plain words"),
            types.TextContent(type="text", text='{"secret": "s3", "name": "x"}'),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text=f"use {GITHUB}"),
            ),
            types.ImageContent(type="image", data="corp-1234", mime_type="image/png"),
        ],
        structured_content={"secret": "s3", "note": "corp-9999"},
    )
    redacted, count = redactor.result(result)
    assert count == 5
    assert texts(redacted) == ["id *** and plain words", '{"secret": "***", "name": "x"}']
    resource = redacted.content[2]
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.TextResourceContents)
    assert resource.resource.text == "use ***"
    image = redacted.content[3]
    assert isinstance(image, types.ImageContent)
    assert image.data == "corp-1234"
    assert redacted.structured_content == {"secret": "***", "note": "***"}


def test_a_clean_result_comes_back_as_it_was() -> None:
    redactor = factory({"keys": ["secret"]}).redactor
    result = text_result("hello", '{"a": 1}', structured={"b": 2})
    assert redactor.result(result) == (result, 0)


async def test_the_middleware_redacts_results_and_optionally_arguments() -> None:
    seen: list[dict[str, Any]] = []

    async def backend(call: Call) -> types.CallToolResult:
        seen.append(dict(call.arguments))
        return text_result(f"echo {call.arguments['note']} {GITHUB}")

    call = Call(server="s", tool="t", exposed="s_t", arguments={"note": f"mine {AWS}", "api_key": "k"})
    result = await factory({})(call, backend)
    assert texts(result) == ["echo mine [REDACTED] [REDACTED]"]
    assert seen[-1] == {"note": f"mine {AWS}", "api_key": "k"}  # arguments untouched by default
    await factory({"arguments": True, "keys": ["api_key"]})(call, backend)
    assert seen[-1] == {"note": "mine [REDACTED]", "api_key": "[REDACTED]"}


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"patterns": ["(unclosed"]}, "pattern '(unclosed' is not a regular expression"),
        ({"keys": "password"}, "option 'keys' expects a list of strings, got 'password'"),
        ({"arguments": False, "results": False}, "it would redact nothing"),
    ],
)
def test_wrong_options_are_refused_with_a_reason(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
        factory(options)
