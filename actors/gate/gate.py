"""A tool's gate: everything a call passes through before and after its backend, built
once per catalog snapshot (never per call; its schemas are compiled on the first call)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import structlog

from assern.actors.config.spec import CallRules, ValidateMode
from assern.actors.gate.chain import Chain
from assern.actors.gate.middleware import error_result
from assern.actors.gate.rules import needs_confirm, validate_mode
from assern.actors.gate.validation import (
    Check,
    InvalidSchema,
    SchemaCache,
    check_schema,
    rejection_text,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import mcp_types as types

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class Gate:
    """What a call of one tool passes through.

    Attributes:
        validate: "warn" logs bad arguments and forwards; "strict" answers them with an
            error result and never calls the backend; "off" checks nothing.
        inputs: The inputSchema's check (None: not validated).
        outputs: The outputSchema's check (None: none declared, or not validated).
        confirm: The calling client is asked (MCP elicitation) before the call is sent.
        schema_problem: Why the backend's own schemas are not JSON Schema, if they are
            not (its tool is then served unvalidated); see `broken` for what compiling
            found later.
        chain: The middlewares around the forwarding (None: none).
        raw: Whether the raw lane may pass the call itself (validation is synchronous; a
            confirmation waits for the client and middlewares work on models, so the
            session path takes those calls). Derived, read on every call.
    """

    validate: ValidateMode = "off"
    inputs: Check | None = None
    outputs: Check | None = None
    confirm: bool = False
    schema_problem: str | None = None
    chain: Chain | None = None
    raw: bool = attrs.field(init=False)

    @raw.default
    def _raw(self) -> bool:
        return not self.confirm and self.chain is None

    @property
    def broken(self) -> str | None:
        """Why this tool's schemas are not checked, if they are not: not JSON Schema
        (known when the catalog was built), or not compilable (known since a call)."""
        if self.schema_problem is not None:
            return self.schema_problem
        for check in (self.inputs, self.outputs):
            if check is not None and check.problem is not None:
                return check.problem
        return None

    def input_problems(self, arguments: Mapping[str, Any] | None) -> list[str]:
        if self.inputs is None:
            return []
        return self.inputs.problems(arguments if arguments is not None else {})

    def output_problems(self, structured: Any) -> list[str]:
        if self.outputs is None:
            return []
        if structured is not None and self.outputs.plainly_valid(structured, unknown_fields=False):
            return []
        if self.outputs.compiled() is None:
            return []
        if structured is None:
            return ["$: no structuredContent, although the tool declares an outputSchema"]
        return self.outputs.problems(structured, unknown_fields=False)


def build_gate(
    tool: types.Tool,
    rules: CallRules,
    names: Sequence[str],
    *,
    grouped: bool = False,
    schemas: SchemaCache | None = None,
    chain: Chain | None = None,
) -> Gate | None:
    """The gate of `tool` under `rules`, or None when its calls pass untouched
    (`schemas`: compiled schemas to reuse; `chain`: its middlewares)."""
    check = schemas.check if schemas is not None else check_schema
    mode = validate_mode(rules, grouped=grouped)
    confirm = needs_confirm(rules, names, tool)
    if mode == "off" and not confirm and chain is None:
        return None
    inputs = outputs = None
    problem = None
    if mode != "off":
        try:
            inputs = check(tool.input_schema)
            if tool.output_schema is not None:
                outputs = check(tool.output_schema)
        except InvalidSchema as exc:
            inputs = outputs = None
            problem = str(exc)
    return Gate(
        validate=mode, inputs=inputs, outputs=outputs, confirm=confirm, schema_problem=problem, chain=chain
    )


def rejected(tool: str, problems: Sequence[str], schema: Mapping[str, Any]) -> types.CallToolResult:
    """The tool result of a call strict validation stopped."""
    return error_result(rejection_text(tool, problems, schema))


def output_mismatch(server: str, tool: str, problems: Sequence[str]) -> types.CallToolResult:
    """The tool result that replaces a backend's answer that breaks its own outputSchema."""
    lines = [
        f"Server '{server}' answered {tool} with structuredContent that does not match the "
        "outputSchema it declared (the backend is at fault, not the call):",
        *(f"- {problem}" for problem in problems),
    ]
    return error_result("\n".join(lines))


def screen_arguments(
    gate: Gate, exposed: str, tool: types.Tool, server: str, original: str, arguments: Any, client: str | None
) -> types.CallToolResult | None:
    """Check a call's arguments: the result that answers it instead of the backend when
    strict validation stops it, else None (a "warn" gate logs what it found). `exposed`
    is the name the client called, `tool` the backend's definition."""
    inputs = gate.inputs
    if inputs is None or inputs.plainly_valid(arguments if arguments is not None else {}):
        return None  # the usual call: known valid in one check (see plain_schema.py)
    problems = gate.input_problems(arguments)
    _tell_uncompilable(gate.inputs, server, original)
    if not problems:
        return None
    if gate.validate == "strict":
        log.info(
            "call_refused", server=server, tool=original, rule="validate", client=client, problems=problems
        )
        return rejected(exposed, problems, tool.input_schema)
    log.warning("call_arguments_invalid", server=server, tool=original, client=client, problems=problems)
    return None


def screen_result(
    gate: Gate, server: str, original: str, result: Mapping[str, Any]
) -> types.CallToolResult | None:
    """Check a backend's answer (as JSON) against its outputSchema: the result that
    replaces it under strict validation, else None (a "warn" gate logs the mismatch)."""
    if gate.outputs is None or result.get("isError"):
        return None
    problems = gate.output_problems(result.get("structuredContent"))
    _tell_uncompilable(gate.outputs, server, original)
    if not problems:
        return None
    log.warning("result_schema_mismatch", server=server, tool=original, problems=problems)
    return output_mismatch(server, original, problems) if gate.validate == "strict" else None


def _tell_uncompilable(check: Check | None, server: str, original: str) -> None:
    """Log once that a schema valid as JSON Schema could not be compiled when its tool
    was first called (its checks are skipped from then on; `assernctl status` lists it)."""
    if check is not None and check.problem is not None and not check.told:
        check.told = True
        log.warning("backend_schema_uncompilable", server=server, tool=original, problem=check.problem)
