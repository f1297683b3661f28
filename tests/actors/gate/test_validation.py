"""Arguments and results against JSON Schemas: every problem with its path, unknown
fields with the closest known one, and schemas that cannot be compiled."""

import pytest

from assern.actors.gate.validation import (
    InvalidSchema,
    SchemaCache,
    check_schema,
    compile_schema,
    fields_summary,
    json_path,
    rejection_text,
)

ISSUE = {
    "type": "object",
    "properties": {
        "repo": {"type": "string"},
        "title": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "state": {"enum": ["open", "closed"]},
    },
    "required": ["repo", "title"],
}


def test_valid_arguments_have_no_problems() -> None:
    check = compile_schema(ISSUE)
    assert check.problems({"repo": "a/b", "title": "t", "labels": ["x"]}) == []
    assert check.is_valid({"repo": "a/b", "title": "t"})


def test_every_problem_names_its_path_and_what_was_expected() -> None:
    check = compile_schema(ISSUE)
    problems = check.problems({"repo": 5, "labels": ["ok", 7], "state": "gone"})
    assert '$.repo: 5 is not of type "string"' in problems
    assert '$.labels[1]: 7 is not of type "string"' in problems
    assert any(p.startswith("$.state:") and '"open"' in p for p in problems)
    assert '$: "title" is a required property' in problems
    assert len(problems) == 4


def test_an_unknown_field_is_named_with_the_closest_known_one() -> None:
    check = compile_schema(ISSUE)
    assert check.problems({"repo": "a/b", "title": "t", "titel": "x"}) == [
        '$.titel: unknown field "titel"; did you mean `title`?'
    ]
    assert check.problems({"repo": "a", "title": "t", "zzz": 1}) == ['$.zzz: unknown field "zzz"']


def test_a_schema_that_allows_other_fields_keeps_them() -> None:
    check = compile_schema({**ISSUE, "additionalProperties": True})
    assert check.problems({"repo": "a", "title": "t", "extra": 1}) == []
    closed = compile_schema({**ISSUE, "additionalProperties": False})
    assert closed.problems({"repo": "a", "title": "t", "rpo": 1}) == [
        '$.rpo: unknown field "rpo"; did you mean `repo`?'
    ]


def test_results_are_not_held_to_the_strict_field_rule() -> None:
    check = compile_schema(ISSUE)
    assert check.problems({"repo": "a", "title": "t", "more": 1}, unknown_fields=False) == []


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "http://json-schema.org/draft-07/schema#", **ISSUE},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", **ISSUE},
    ],
)
def test_both_dialects_backends_declare_are_followed(schema: dict[str, object]) -> None:
    assert compile_schema(schema).problems({"repo": "a"}) == ['$: "title" is a required property']


def test_an_invalid_schema_is_reported_not_compiled() -> None:
    with pytest.raises(InvalidSchema, match="strin"):
        compile_schema({"type": "object", "properties": {"a": {"type": "strin"}}})


def test_a_remote_reference_is_never_fetched() -> None:
    with pytest.raises(InvalidSchema, match=r"http://example\.invalid/s\.json"):
        compile_schema({"$ref": "http://example.invalid/s.json"})


def test_paths_and_the_text_a_model_reads() -> None:
    assert json_path(["a", 0, "b c"]) == '$.a[0]["b c"]'
    assert fields_summary(ISSUE).startswith("repo (string, required), title (string, required)")
    text = rejection_text("gh_create_issue", ["$.repo: bad"], ISSUE)
    assert text.splitlines()[0] == (
        "Invalid arguments for gh_create_issue; the call was not sent. Fix these and call again:"
    )
    assert "- $.repo: bad" in text
    assert "Fields: repo (string, required)" in text


def test_the_cache_compiles_each_schema_object_once_and_forgets_unused_ones() -> None:
    cache = SchemaCache()
    schema = {**ISSUE}
    first = cache.check(schema)
    assert cache.check(schema) is first
    assert cache.check({**ISSUE}) is not first  # an equal but other object: its own entry
    broken = {"type": "object", "properties": {"a": {"type": "strin"}}}
    for _ in range(2):
        with pytest.raises(InvalidSchema, match="strin"):
            cache.check(broken)
    cache.sweep()
    assert cache.check(schema) is first  # used since the last sweep: kept
    cache.sweep()
    cache.sweep()
    assert cache.check(schema) is not first  # unused through a whole sweep: forgotten


def test_a_schema_is_checked_at_once_and_compiled_on_first_use() -> None:
    check = check_schema(ISSUE)
    assert check._validator is None  # nothing compiled yet
    assert check.problems({"repo": "a"}) == ['$: "title" is a required property']
    first = check.compiled()
    assert first is not None
    check.problems({})
    assert check.compiled() is first  # compiled once
    with pytest.raises(InvalidSchema, match="strin"):  # not JSON Schema: known at once
        check_schema({"type": "object", "properties": {"a": {"type": "strin"}}})


def test_what_only_compiling_finds_is_kept_and_the_schema_left_unchecked() -> None:
    unresolved = check_schema({"$ref": "http://example.invalid/s.json"})  # valid JSON Schema
    assert not unresolved.problem
    assert unresolved.problems({"any": "thing"}) == []
    assert unresolved.problem is not None
    assert "example.invalid" in unresolved.problem
    assert unresolved.is_valid(5)
    bad_pattern = check_schema({"type": "string", "pattern": "(["})
    assert bad_pattern.problems("x") == []
    assert bad_pattern.problem


def test_a_dialect_unknown_offline_is_left_to_the_compiler_never_fetched() -> None:
    check = check_schema({"$schema": "http://example.invalid/meta", "type": "object"})
    assert check.problems({}) == []
    assert check.problem is not None
    assert "example.invalid" in check.problem
    draft7 = check_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"})
    assert draft7.problems("x") == ['$: "x" is not of type "integer"']
