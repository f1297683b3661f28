"""The safety rules of a tool in a view: deny, read_only, confirm and the validate mode,
and how the layers add up."""

import mcp_types as types
import structlog

from assern.actors.config.spec import CallRules
from assern.actors.gate.gate import build_gate, screen_arguments, screen_result
from assern.actors.gate.rules import (
    combine,
    is_destructive,
    is_read_only,
    needs_confirm,
    refusal,
    validate_mode,
)


def tool(name: str, **hints: bool) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None  # type: ignore[arg-type]
    return types.Tool(name=name, input_schema={"type": "object"}, annotations=annotations)


NAMES = ("gh_delete_repo", "gh_delete_repo", "delete_repo")


def test_layers_add_denials_and_confirmations_and_the_last_validate_wins() -> None:
    merged = combine(
        CallRules(deny=("*_delete_*",), validate="strict"),
        CallRules(deny=("*_admin_*", "*_delete_*"), read_only=True),
        CallRules(confirm=("destructive",), validate="off"),
    )
    assert merged == CallRules(
        deny=("*_delete_*", "*_admin_*"), read_only=True, validate="off", confirm=("destructive",)
    )


def test_deny_matches_the_exposed_prefixed_or_own_name() -> None:
    found = refusal(CallRules(deny=("delete_*",)), NAMES, "gh", tool("delete_repo"))
    assert found is not None
    assert (found.server, found.rule) == ("gh", "deny")
    assert "`deny = 'delete_*'`" in found.reason
    assert refusal(CallRules(deny=("*_create_*",)), NAMES, "gh", tool("delete_repo")) is None


def test_read_only_keeps_only_tools_that_say_they_change_nothing() -> None:
    rules = CallRules(read_only=True)
    assert refusal(rules, NAMES, "gh", tool("get", readOnlyHint=True)) is None
    for unsure in (tool("x"), tool("x", readOnlyHint=False), tool("x", destructiveHint=False)):
        found = refusal(rules, NAMES, "gh", unsure)
        assert found is not None
        assert found.rule == "read_only"
        assert "readOnlyHint" in found.reason


def test_a_tool_is_destructive_unless_it_says_otherwise() -> None:
    assert is_destructive(tool("x"))
    assert is_destructive(tool("x", destructiveHint=True))
    assert not is_destructive(tool("x", destructiveHint=False))
    assert not is_destructive(tool("x", readOnlyHint=True))
    assert is_read_only(tool("x", readOnlyHint=True))


def test_confirm_by_name_or_by_the_word_destructive() -> None:
    assert needs_confirm(CallRules(confirm=("*_delete_*",)), NAMES, tool("delete_repo", readOnlyHint=True))
    assert needs_confirm(CallRules(confirm=("destructive",)), NAMES, tool("delete_repo"))
    assert not needs_confirm(CallRules(confirm=("destructive",)), NAMES, tool("get", readOnlyHint=True))
    assert not needs_confirm(CallRules(), NAMES, tool("delete_repo"))


def test_validation_is_strict_for_grouped_tools_and_warns_otherwise_unless_told() -> None:
    assert validate_mode(CallRules(), grouped=False) == "warn"
    assert validate_mode(CallRules(), grouped=True) == "strict"
    assert validate_mode(CallRules(validate="off"), grouped=True) == "off"


def test_a_gate_is_built_only_where_a_call_is_checked() -> None:
    plain = tool("get")
    assert build_gate(plain, CallRules(validate="off"), NAMES) is None
    gate = build_gate(plain, CallRules(), NAMES)
    assert gate is not None
    assert (gate.validate, gate.confirm, gate.raw) == ("warn", False, True)
    asked = build_gate(plain, CallRules(validate="off", confirm=("*",)), NAMES)
    assert asked is not None
    assert (asked.inputs, asked.confirm, asked.raw) == (None, True, False)


def test_a_backend_schema_that_cannot_compile_is_served_unvalidated() -> None:
    broken = types.Tool(name="x", input_schema={"type": "object", "properties": {"a": {"type": 5}}})
    gate = build_gate(broken, CallRules(validate="strict"), NAMES)
    assert gate is not None
    assert gate.inputs is None
    assert gate.schema_problem
    assert gate.input_problems({"a": "anything"}) == []


def test_a_schema_that_compiles_only_on_a_call_and_fails_is_told_once_and_skipped() -> None:
    odd = types.Tool(
        name="x",
        input_schema={"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}},
        output_schema={"type": "object", "required": ["n"]},
    )
    gate = build_gate(odd, CallRules(validate="strict"), NAMES)
    assert gate is not None
    assert gate.inputs is not None
    assert not gate.broken  # valid JSON Schema: nothing known before a call
    with structlog.testing.capture_logs() as logs:
        for _ in range(2):
            assert screen_arguments(gate, "s_x", odd, "s", "x", {"a": 5}, None) is None
    assert gate.broken is not None
    told = [entry for entry in logs if entry["event"] == "backend_schema_uncompilable"]
    assert [(entry["server"], entry["tool"]) for entry in told] == [("s", "x")]
    # the output schema compiles: still checked
    assert screen_result(gate, "s", "x", {"structuredContent": {}}) is not None


def test_output_problems_include_a_missing_structured_content() -> None:
    declared = types.Tool(
        name="x",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    gate = build_gate(declared, CallRules(), NAMES)
    assert gate is not None
    assert gate.output_problems({"n": 1}) == []
    assert gate.output_problems({"n": "1"}) == ['$.n: "1" is not of type "integer"']
    assert gate.output_problems(None) == [
        "$: no structuredContent, although the tool declares an outputSchema"
    ]
