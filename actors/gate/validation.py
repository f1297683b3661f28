"""Arguments checked against a tool's inputSchema, results against its outputSchema.

Schemas are checked with jsonschema-rs: it follows draft-07 and 2020-12 (the two dialects
MCP servers declare; no `$schema` means 2020-12, as the MCP specification says),
validates a ten-field object in well under a microsecond, and never fetches a remote
`$ref` (offline). A problem is one line a model can act on: the JSON path, what was
expected, and for a field the schema does not know, the closest one it does.

A schema is checked against its dialect's meta-schema when the catalog is built (about
3 µs: a schema that is not JSON Schema is reported at once) but compiled only when its
tool is first called (a compiled schema takes about 9 KB, the `validator_kb` of
ops/bench/search/run.py; most of a large catalog's tools are never called). What only
compiling finds (a `$ref` that does not resolve, a `pattern` that is not a regular
expression) is found then, and reported the same way.

A plain schema (plain_schema.py) needs neither: it is valid by its shape, and a value
that satisfies it is told so in Python. jsonschema-rs is imported when a schema or a
value first needs it, so an instance whose tools are plain and whose calls are valid
never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.gate.plain_schema import PlainCheck, plain_checker

if TYPE_CHECKING:
    from types import ModuleType


class InvalidSchema(Exception):
    """A backend declared a schema that is not valid JSON Schema (its tool is served
    unvalidated)."""


def json_path(parts: Sequence[str | int]) -> str:
    """`$.a[0].b` for the path (a, 0, b)."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _compiler() -> ModuleType:
    """jsonschema-rs, imported on first use (about 8 MB resident once loaded)."""
    import jsonschema_rs  # deferred on purpose: see the module's docstring

    return jsonschema_rs


def _schema_errors() -> tuple[type[Exception], ...]:
    """What jsonschema-rs raises for a schema it cannot check or compile."""
    compiler = _compiler()
    return (compiler.ValidationError, compiler.ReferencingError, ValueError)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


@attrs.define(eq=False)
class Check:
    """One schema, compiled on first use, and what the strict check adds to it.

    A memo owned by the router's catalog snapshots (one trio thread uses it): the
    compiled validator, or why the schema could not be compiled, is kept once known.

    Attributes:
        schema: The schema as the backend declared it.
        fields: The top-level properties the schema names (the candidates of "did you
            mean").
        open: Whether the schema allows fields it does not name (it says so, or
            composes other schemas); when it says nothing, the strict check calls a field
            outside `fields` unknown, as a model's typo usually is.
        problem: Why compiling failed, once it did (the schema is then not checked).
        told: Whether that failure was reported (see gate.py).
        plain: Whether the schema is plain (see plain_schema.py): its values are then
            checked in Python, by a checker built on the first check (a catalog holds
            checkers only for the tools that were called, as it holds compiled schemas).
    """

    schema: Mapping[str, Any]
    fields: tuple[str, ...] = ()
    open: bool = True
    plain: bool = False
    _plain_check: PlainCheck | None = None
    _named: frozenset[str] = frozenset()
    problem: str | None = None
    told: bool = False
    _validator: Any = None

    def compiled(self) -> Any | None:
        """The compiled schema (compiled now if it was not), or None when it cannot be."""
        if self._validator is None and self.problem is None:
            try:
                self._validator = _compiler().validator_for(dict(self.schema), offline=True)
            except _schema_errors() as exc:
                self.problem = _first_line(str(exc))
        return self._validator

    def plainly_valid(self, value: Any, *, unknown_fields: bool = True) -> bool:
        """Whether `value` is known valid without the compiler (a plain schema's check,
        and with `unknown_fields` the strict check's rule on unnamed fields)."""
        if not self.plain:
            return False
        if self._plain_check is None:
            self._plain_check = plain_checker(self.schema)
            if self._plain_check is None:  # not plain after all: the compiler decides
                self.plain = False
                return False
            self._named = frozenset(self.fields)
        if not self._plain_check(value):
            return False
        if unknown_fields and not self.open and (type(value) is dict or isinstance(value, Mapping)):
            return self._named.issuperset(value)
        return True

    def is_valid(self, value: Any) -> bool:
        if self.plainly_valid(value, unknown_fields=False):
            return True
        validator = self.compiled()
        return validator is None or bool(validator.is_valid(value))

    def problems(self, value: Any, *, unknown_fields: bool = True) -> list[str]:
        """Every problem of `value`, one line each (empty when it is valid, or when the
        schema cannot be compiled)."""
        if self.plainly_valid(value, unknown_fields=unknown_fields):
            return []
        validator = self.compiled()
        if validator is None:
            return []
        found: list[str] = []
        for error in validator.iter_errors(value):
            message = _first_line(str(error.message))
            path = list(error.instance_path)
            kind = getattr(error.kind, "name", "")
            if kind == "additional_properties" or "was unexpected" in message:
                unexpected = getattr(error.kind, "unexpected", None) or []
                found.extend(self._unknown([*path, name], name) for name in unexpected)
                if unexpected:
                    continue
            found.append(f"{json_path(path)}: {message}")
        if unknown_fields and not self.open and isinstance(value, Mapping):
            for name in value:
                if name not in self.fields:
                    line = self._unknown([name], name)
                    if line not in found:
                        found.append(line)
        return found

    def _unknown(self, path: list[str | int], name: Any) -> str:
        line = f"{json_path(path)}: unknown field {json.dumps(name)}"
        if len(path) == 1 and self.fields:
            import difflib  # only here: not loaded until needed

            close = difflib.get_close_matches(str(name), self.fields, n=1, cutoff=0.5)
            if close:
                line += f"; did you mean `{close[0]}`?"
        return line


#: Keywords with which a schema says something about fields it does not name.
_SAYS_MORE = (
    "additionalProperties",
    "patternProperties",
    "unevaluatedProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "if",
    "dependentSchemas",
)


#: The dialects jsonschema-rs knows without fetching anything (`$schema`, without "#").
_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)


def check_schema(schema: Mapping[str, Any]) -> Check:
    """The check of `schema`, compiled on first use; the schema is checked against its
    dialect's meta-schema now (a `$schema` of another dialect is left to the compiler,
    which knows no more of it offline and says so).

    Raises:
        InvalidSchema: it is not valid JSON Schema (the reason, in one line).
    """
    plain = plain_checker(schema) is not None  # the checker itself is built on first use
    dialect = schema.get("$schema")
    if not plain and (dialect is None or (isinstance(dialect, str) and dialect.rstrip("#") in _DIALECTS)):
        try:
            _compiler().meta.validate(dict(schema))
        except _schema_errors() as exc:
            raise InvalidSchema(_first_line(str(exc))) from None
    properties = schema.get("properties")
    fields = tuple(properties) if isinstance(properties, Mapping) else ()
    open_ = not fields or any(k in schema for k in _SAYS_MORE)
    return Check(schema=schema, fields=fields, open=open_, plain=plain)


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """The check of `schema`, compiled now.

    Raises:
        InvalidSchema: it is not valid JSON Schema or cannot be compiled.
    """
    check = check_schema(schema)
    if check.compiled() is None:
        raise InvalidSchema(check.problem)
    return check


def fields_summary(schema: Mapping[str, Any], *, most: int = 20) -> str:
    """`owner (string, required), repo (string, required), …` of an object schema."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return ""
    required = set(schema.get("required") or ())
    parts = []
    for name, sub in list(properties.items())[:most]:
        kind = sub.get("type") if isinstance(sub, Mapping) else None
        if isinstance(kind, list):
            kind = " or ".join(str(k) for k in kind)
        facts = [str(kind)] if kind else []
        if name in required:
            facts.append("required")
        parts.append(f"{name} ({', '.join(facts)})" if facts else name)
    if len(properties) > most:
        parts.append(f"… {len(properties) - most} more")
    return ", ".join(parts)


def rejection_text(tool: str, problems: Sequence[str], schema: Mapping[str, Any]) -> str:
    """What a model reads when its call was not sent: every problem, then the fields."""
    lines = [f"Invalid arguments for {tool}; the call was not sent. Fix these and call again:"]
    lines += [f"- {problem}" for problem in problems]
    summary = fields_summary(schema)
    if summary:
        lines.append(f"Fields: {summary}")
    return "\n".join(lines)


class SchemaCache:
    """Schema checks shared by every view's catalog and kept from one rebuild to the
    next: a backend's listing keeps the same schema objects until it lists again, so each
    schema is checked and compiled once, not once per view and rebuild.

    Owned by the router (its only user); `sweep` after a rebuild forgets the schemas that
    rebuild did not use.
    """

    def __init__(self) -> None:
        #: id(schema) -> (the schema, kept so its id stays its own; its Check or why not)
        self._kept: dict[int, tuple[Mapping[str, Any], Check | InvalidSchema]] = {}
        self._used: dict[int, tuple[Mapping[str, Any], Check | InvalidSchema]] = {}

    def check(self, schema: Mapping[str, Any]) -> Check:
        """`check_schema(schema)`, from the cache when this very schema was checked.

        Raises:
            InvalidSchema: it is not valid JSON Schema.
        """
        key = id(schema)
        entry = self._used.get(key) or self._kept.get(key)
        if entry is None or entry[0] is not schema:
            try:
                entry = (schema, check_schema(schema))
            except InvalidSchema as exc:
                entry = (schema, exc)
        self._used[key] = entry
        if isinstance(entry[1], InvalidSchema):
            raise entry[1]
        return entry[1]

    def sweep(self) -> None:
        """Keep only the schemas used since the last sweep."""
        self._kept, self._used = self._used, {}
