"""Property-based: for generated object schemas, arguments generated to fit pass, and
each kind of mistake (a missing required field, a wrong type, an out-of-enum value, a
misspelled field) is reported with its JSON path, and a misspelling with the field meant."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from assern.actors.gate.validation import compile_schema, rejection_text

#: (schema of a field, strategy of its valid values, a value of the wrong type)
KINDS: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any], Any]] = {
    "string": ({"type": "string"}, st.text(max_size=20), 7),
    "integer": ({"type": "integer", "minimum": 0}, st.integers(min_value=0, max_value=10**6), "seven"),
    "boolean": ({"type": "boolean"}, st.booleans(), "yes"),
    "number": ({"type": "number"}, st.floats(allow_nan=False, allow_infinity=False, width=32), [1]),
    "tags": (
        {"type": "array", "items": {"type": "string"}},
        st.lists(st.text(max_size=8), max_size=4),
        {"a": 1},
    ),
    "choice": ({"enum": ["open", "closed"]}, st.sampled_from(["open", "closed"]), "ajar"),
}

# Field names as tools use them: distinct words, long enough for a misspelling to be close.
NAMES = st.lists(
    st.sampled_from(
        ["owner", "repository", "title", "description", "labels", "assignee", "milestone", "state"]
    ),
    min_size=1,
    max_size=6,
    unique=True,
)


@st.composite
def schemas(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str]]:
    """An object schema and the kind of each field."""
    names = draw(NAMES)
    kinds = {name: draw(st.sampled_from(sorted(KINDS))) for name in names}
    required = [name for name in names if draw(st.booleans())]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: KINDS[kind][0] for name, kind in kinds.items()},
    }
    if required:
        schema["required"] = required
    return schema, kinds


@st.composite
def valid_call(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    schema, kinds = draw(schemas())
    required = set(schema.get("required", ()))
    arguments = {
        name: draw(KINDS[kind][1]) for name, kind in kinds.items() if name in required or draw(st.booleans())
    }
    return schema, kinds, arguments


@settings(max_examples=150, deadline=None)
@given(valid_call())
def test_arguments_that_fit_the_schema_pass(
    call: tuple[dict[str, Any], dict[str, str], dict[str, Any]],
) -> None:
    schema, _, arguments = call
    assert compile_schema(schema).problems(arguments) == []


@settings(max_examples=150, deadline=None)
@given(valid_call(), st.data())
def test_a_missing_required_field_is_named(
    call: tuple[dict[str, Any], dict[str, str], dict[str, Any]], data: st.DataObject
) -> None:
    schema, _, arguments = call
    required = schema.get("required")
    if not required:
        return
    missing = data.draw(st.sampled_from(required))
    del arguments[missing]
    problems = compile_schema(schema).problems(arguments)
    assert problems == [f'$: "{missing}" is a required property']
    assert f'- $: "{missing}" is a required property' in rejection_text("t", problems, schema)


@settings(max_examples=150, deadline=None)
@given(valid_call(), st.data())
def test_a_value_of_the_wrong_kind_is_reported_at_its_path(
    call: tuple[dict[str, Any], dict[str, str], dict[str, Any]], data: st.DataObject
) -> None:
    schema, kinds, arguments = call
    name = data.draw(st.sampled_from(sorted(kinds)))
    arguments[name] = KINDS[kinds[name]][2]
    problems = compile_schema(schema).problems(arguments)
    assert len(problems) == 1
    assert problems[0].startswith(f"$.{name}: ")


@settings(max_examples=150, deadline=None)
@given(valid_call(), st.data())
def test_a_wrong_item_of_an_array_is_reported_at_its_index(
    call: tuple[dict[str, Any], dict[str, str], dict[str, Any]], data: st.DataObject
) -> None:
    schema, kinds, arguments = call
    arrays = sorted(name for name, kind in kinds.items() if kind == "tags")
    if not arrays:
        return
    name = data.draw(st.sampled_from(arrays))
    items = [*arguments.get(name, []), 42]
    arguments[name] = items
    problems = compile_schema(schema).problems(arguments)
    assert problems == [f'$.{name}[{len(items) - 1}]: 42 is not of type "string"']


@settings(max_examples=150, deadline=None)
@given(valid_call(), st.data())
def test_a_misspelled_field_is_unknown_and_the_intended_one_suggested(
    call: tuple[dict[str, Any], dict[str, str], dict[str, Any]], data: st.DataObject
) -> None:
    schema, kinds, arguments = call
    name = data.draw(st.sampled_from(sorted(kinds)))
    cut = data.draw(st.integers(min_value=1, max_value=len(name) - 1))
    typo = name[:cut] + name[cut + 1 :]  # one letter dropped
    if typo in kinds:
        return
    value = arguments.pop(name, None)
    arguments[typo] = value if value is not None else KINDS[kinds[name]][2]
    problems = compile_schema(schema).problems(arguments)
    assert f'$.{typo}: unknown field "{typo}"; did you mean `{name}`?' in problems
    if name in schema.get("required", ()):
        assert f'$: "{name}" is a required property' in problems
