"""Plain schemas are checked in Python, and never disagree with jsonschema-rs."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assern.actors.gate.plain_schema import plain_checker
from assern.actors.gate.validation import check_schema

TOOL = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "description": "what to say"},
        "count": {"type": "integer", "minimum": 0, "maximum": 10},
        "mode": {"enum": ["fast", "slow"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["text"],
    "title": "sayArguments",
}


def test_a_plain_tool_schema_checks_its_valid_values_in_python() -> None:
    check = plain_checker(TOOL)
    assert check is not None
    assert check({"text": "hi"})
    assert check({"text": "hi", "count": 3, "mode": "slow", "tags": ["a"], "note": None})


@pytest.mark.parametrize(
    "value",
    [
        {},  # required missing
        {"text": ""},  # minLength
        {"text": "hi", "count": 11},  # maximum
        {"text": "hi", "count": True},  # a boolean is not an integer
        {"text": "hi", "count": 2.0},  # an integer to JSON Schema, but left to the compiler
        {"text": "hi", "mode": "medium"},  # enum
        {"text": "hi", "tags": ["a", "b", "c", "d"]},  # maxItems
        {"text": "hi", "tags": [1]},  # items
        {"text": "hi", "note": 3},  # anyOf
        "hi",  # type
    ],
)
def test_a_value_not_known_valid_goes_to_the_compiler(value: Any) -> None:
    check = plain_checker(TOOL)
    assert check is not None
    assert not check(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/b"}}, "$defs": {"a": {}}},
        {
            "properties": {"a": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"properties": {"b": {"$ref": "#/$defs/a"}}}},
        },
        {"properties": {"a": {"$ref": "#/$defs/a", "type": "object"}}, "$defs": {"a": {}}},
        {"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {}, "b": {"pattern": "x"}}},
        {"properties": {"a": {"$ref": "#/$defs/a~1b"}}, "$defs": {"a/b": {}}},
        {"type": "string", "pattern": "^a"},
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": "nope"},
        {"type": ["string", "string"]},
        {"required": ["a", "a"]},
        {"minLength": -1},
        {"enum": []},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"items": [{"type": "string"}]},
        [],
    ],
)
def test_a_schema_it_does_not_fully_understand_is_not_plain(schema: Any) -> None:
    assert plain_checker(schema) is None


def test_enum_and_const_use_json_equality() -> None:
    one = plain_checker({"enum": [1, "a", None]})
    assert one is not None
    assert all(one(value) for value in (1, 1.0, "a", None))
    assert not one(True)
    truth = plain_checker({"const": True})
    assert truth is not None
    assert truth(True)
    assert not truth(1)


def test_additional_properties_false_and_a_schema() -> None:
    closed = plain_checker({"properties": {"a": {}}, "additionalProperties": False})
    assert closed is not None
    assert closed({"a": 1})
    assert not closed({"a": 1, "b": 2})
    typed = plain_checker({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}})
    assert typed is not None
    assert typed({"a": "x", "b": 2})
    assert not typed({"b": "x"})


def test_local_definitions_as_pydantic_writes_them() -> None:
    schema = {
        "type": "object",
        "properties": {"source": {"$ref": "#/$defs/Time"}, "note": {"title": "Note", "type": "string"}},
        "required": ["source"],
        "$defs": {
            "Time": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
        },
    }
    check = plain_checker(schema)
    assert check is not None
    assert check({"source": {"zone": "UTC"}})
    assert not check({"source": {"zone": 3}})
    assert not check({"source": {}})
    draft7 = {"definitions": {"T": {"type": "integer"}}, "items": {"$ref": "#/definitions/T"}}
    check = plain_checker(draft7)
    assert check is not None
    assert check([1, 2])
    assert not check([1, "2"])


def test_check_schema_answers_a_plain_schema_without_the_compiler() -> None:
    check = check_schema(TOOL)
    assert check.plain
    assert check.problems({"text": "hi"}) == []
    # the strict rule on unnamed fields still applies on the plain path
    assert check.problems({"text": "hi", "txt": "x"}) == ['$.txt: unknown field "txt"; did you mean `text`?']
    # a problem is described by the compiler, as before
    assert check.problems({"text": 3}) == ['$.text: 3 is not of type "string"']


# ------------------------------------------------------- never wiser than the compiler

_KINDS = ["object", "array", "string", "number", "integer", "boolean", "null"]
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.text(max_size=3)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=6,
)


_COUNTS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"]
_BOUNDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]


def _one_key(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(st.sampled_from(keys), values).map(lambda kv: {kv[0]: kv[1]})


def _leaves() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just(True),
        _one_key(["type"], st.sampled_from(_KINDS)),
        _one_key(["type"], st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3, unique=True)),
        _one_key(["enum"], st.lists(_scalars, min_size=1, max_size=3)),
        _one_key(["const"], _scalars),
        _one_key(_COUNTS, st.integers(0, 3)),
        _one_key(_BOUNDS, st.integers(-3, 3)),
    )


def _schemas() -> st.SearchStrategy[Any]:
    return st.recursive(
        _leaves(),
        lambda inner: st.one_of(
            st.fixed_dictionaries(
                {
                    "type": st.just("object"),
                    "properties": st.dictionaries(st.sampled_from(["a", "b"]), inner),
                },
                optional={
                    "required": st.lists(st.sampled_from(["a", "b", "c"]), unique=True),
                    "additionalProperties": st.one_of(st.booleans(), inner),
                },
            ),
            st.fixed_dictionaries({"items": inner}, optional={"type": st.just("array")}),
            st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
            st.fixed_dictionaries(
                {"$defs": st.fixed_dictionaries({"d": inner}), "items": st.just({"$ref": "#/$defs/d"})}
            ),
        ),
        max_leaves=5,
    )


def _agrees(schema: Any, value: Any) -> None:
    check = plain_checker(schema)
    if check is None:
        return
    assert jsonschema_rs.meta.is_valid(schema) if isinstance(schema, dict) else schema is True
    if check(value):
        assert jsonschema_rs.validator_for(schema).is_valid(value), (schema, value)


#: flat values around the leaves' limits (0 to 3 characters, items, fields, units)
_flat_values = st.one_of(
    _scalars,
    st.text(max_size=4),
    st.lists(_scalars, max_size=4),
    st.dictionaries(st.sampled_from("abcd"), _scalars, max_size=4),
)


@settings(max_examples=400, deadline=None)
@given(schema=_leaves(), value=_flat_values)
def test_each_keyword_alone_agrees_with_the_compiler(schema: Any, value: Any) -> None:
    _agrees(schema, value)


@settings(max_examples=400, deadline=None)
@given(schema=_schemas(), value=_values)
def test_a_plain_schema_is_valid_and_a_plain_yes_is_the_compilers_yes(schema: Any, value: Any) -> None:
    _agrees(schema, value)


def _has_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, list):
        return any(_has_integral_float(item) for item in value)
    if isinstance(value, dict):
        return any(_has_integral_float(item) for item in value.values())
    return False


@settings(max_examples=400, deadline=None)
@given(schema=_schemas(), value=_values)
def test_a_plain_checker_says_yes_to_every_valid_value_it_can_tell(schema: Any, value: Any) -> None:
    """The other side: a valid call must not cost a compiled check. Only 1.0 as an
    integer is left to the compiler."""
    check = plain_checker(schema)
    if check is None or _has_integral_float(value):
        return
    assert check(value) == jsonschema_rs.validator_for(schema).is_valid(value), (schema, value)


def test_the_usual_tool_schema_is_one_check_and_still_exact() -> None:
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "what to say"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    check = plain_checker(schema)
    assert check is not None
    assert check({"text": "x", "count": 2, "ratio": 0.5, "tags": ["a"]})
    assert check({"text": "x", "ratio": 2})
    for invalid in (
        {},  # required
        {"text": 1},
        {"text": "x", "count": True},  # a boolean is no integer
        {"text": "x", "count": 1.5},
        {"text": "x", "tags": [1]},
        {"text": "x", "other": 1},  # additionalProperties: false
        ["text"],
    ):
        assert not check(invalid), invalid

    class Text(str):
        pass

    assert not check({"text": Text("x")})  # not a decoded JSON value: left to the compiler
