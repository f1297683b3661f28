"""Plain schemas: told valid by reading them, and their valid values told in Python.

Most tools declare a plain schema: an object whose properties have JSON types, with
`required`, `enum`, bounds, arrays of plain items, an optional field as `anyOf` with
`null`. Such a schema is valid JSON Schema (draft-07 and 2020-12 alike) by its shape, and
whether a value satisfies it takes a few dictionary lookups. That is all a valid call of
such a tool needs, so an instance whose calls are valid never loads jsonschema-rs (about
10 MB resident once loaded and used) and a valid call costs no compiled check.

The rule is one-sided. `plain_checker` returns None for any schema it does not
understand entirely (a `pattern`, a `format`, `oneOf`, a `$ref` other than to a local
definition, a recursive schema, …), and its checker
answers only "valid" (True) or "not known to be valid" (False). Everything else, every
problem a model or the log reads included, still comes from jsonschema-rs, so what is
reported does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: True: the value is valid for the schema; False: not known (ask the compiler).
PlainCheck = Callable[[Any], bool]

#: Keywords that say nothing about validity (annotations).
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)
#: The dialects whose meaning of the keywords below is the same (`$schema`, without "#").
_DIALECTS = frozenset(
    {"http://json-schema.org/draft-07/schema", "https://json-schema.org/draft/2020-12/schema"}
)
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def plain_checker(schema: Any) -> PlainCheck | None:
    """A checker of values for `schema` when it is plain (see the module), else None.

    A schema it returns a checker for is valid JSON Schema.
    """
    if not isinstance(schema, Mapping):
        return None
    dialect = schema.get("$schema")
    if dialect is not None and not (isinstance(dialect, str) and dialect.rstrip("#") in _DIALECTS):
        return None
    return _Builder(schema).document(schema)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    # 1.0 is an integer to JSON Schema too: not known here, so left to the compiler
    return isinstance(value, int) and not isinstance(value, bool)


#: Whether a value (decoded JSON) is certainly of a JSON Schema type.
_OF_TYPE: dict[str, PlainCheck] = {
    "string": lambda value: isinstance(value, str),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "integer": _is_integer,
    "number": _is_number,
}


def _of_type(value: Any, kind: str) -> bool:
    """Whether `value` (decoded JSON) is certainly of JSON Schema type `kind`."""
    return _OF_TYPE[kind](value)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, and 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


class _Builder:
    """Builds the checker of one schema document: its nodes, and the entries of its
    `$defs` (or draft-07 `definitions`) that `$ref`s name, each built once."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.defs: dict[str, Any] = {}
        for container in ("$defs", "definitions"):
            found = root.get(container)
            if isinstance(found, Mapping):
                self.defs.update({f"#/{container}/{name}": sub for name, sub in found.items()})
        self._built: dict[str, PlainCheck | None] = {}
        self._building: set[str] = set()

    def document(self, root: Mapping[str, Any]) -> PlainCheck | None:
        for container in ("$defs", "definitions"):
            found = root.get(container)
            if found is not None and not isinstance(found, Mapping):
                return None
            # a name a pointer would have to escape is left to the compiler
            if found and any(not isinstance(n, str) or any(c in n for c in "/~%#") for n in found):
                return None
        # every definition must be plain, referenced or not (the schema is then valid)
        if any(self.ref(pointer) is None for pointer in self.defs):
            return None
        return self.node(root, root=True)

    def ref(self, pointer: Any) -> PlainCheck | None:
        """The check of a local definition, None when it is not one or not plain (a
        cycle included: recursive schemas are left to the compiler)."""
        if not isinstance(pointer, str) or pointer not in self.defs or pointer in self._building:
            return None
        if pointer not in self._built:
            self._building.add(pointer)
            try:
                self._built[pointer] = self.node(self.defs[pointer])
            finally:
                self._building.discard(pointer)
        return self._built[pointer]

    def node(self, schema: Any, *, root: bool = False) -> PlainCheck | None:
        if schema is True:
            return _anything
        if not isinstance(schema, Mapping):
            return None
        if "$ref" in schema:
            # alone but for annotations: draft-07 ignores a `$ref`'s siblings, 2020-12 does not
            if root or any(key not in _ANNOTATIONS for key in schema if key != "$ref"):
                return None
            return self.ref(schema["$ref"])
        if schema.get("type") == "object":
            flat = self.object_node(schema, root=root)
            if flat is not None:
                return flat
        checks: list[PlainCheck] = []
        for key, value in schema.items():
            if key in _ANNOTATIONS or (root and key in ("$schema", "$defs", "definitions")):
                continue
            check = self.keyword(schema, key, value)
            if check is None:
                return None
            checks.append(check)
        return _all_of(tuple(checks))

    def object_node(self, schema: Mapping[str, Any], *, root: bool = False) -> PlainCheck | None:
        """The usual tool schema as one check: an object with `properties` (most of them
        just typed), `required` and `additionalProperties`, and nothing else. A valid call
        then costs one function call, not one per keyword and field. None: build it the
        general way (which also refuses what is not plain)."""
        skipped = ("$schema", "$defs", "definitions") if root else ()
        if any(key not in _OBJECT_KEYS and key not in _ANNOTATIONS and key not in skipped for key in schema):
            return None
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            return None
        if not all(isinstance(n, str) for n in required) or len(set(required)) != len(required):
            return None
        typed: dict[str, tuple[type, ...]] = {}
        others: dict[str, PlainCheck] = {}
        for name, sub in properties.items():
            kinds = _bare_type(sub)
            if kinds is not None:
                typed[name] = kinds
                continue
            check = self.node(sub)
            if check is None:
                return None
            others[name] = check
        closed, extra = False, None
        if "additionalProperties" in schema:
            more = schema["additionalProperties"]
            if more is False:
                closed = True
            else:
                extra = self.node(more)
                if extra is None:
                    return None
        return _object_check(typed, others, tuple(required), closed=closed, extra=extra)

    def keyword(self, schema: Mapping[str, Any], key: str, value: Any) -> PlainCheck | None:
        """The check of one keyword of a plain schema, or None when it is not plain."""
        if key == "type":
            kinds = [value] if isinstance(value, str) else value
            known = isinstance(kinds, list) and all(isinstance(k, str) and k in _TYPES for k in kinds)
            if not known or not kinds or len(set(kinds)) != len(kinds):
                return None
            return _type_check(tuple(kinds))
        if key == "properties":
            if not isinstance(value, Mapping):
                return None
            subs = {name: self.node(sub) for name, sub in value.items()}
            if any(check is None for check in subs.values()):
                return None
            return _properties_check({n: c for n, c in subs.items() if c is not None})
        if key == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                return None
            return _required_check(tuple(value)) if len(set(value)) == len(value) else None
        if key == "additionalProperties":
            extra = None if value is False else self.node(value)
            if value is not False and extra is None:
                return None
            named = schema.get("properties")
            return _additional_check(frozenset(named) if isinstance(named, Mapping) else frozenset(), extra)
        if key == "items":
            sub = self.node(value)
            return None if sub is None else _items_check(sub)
        if key == "enum":
            return _one_of_values(tuple(value)) if isinstance(value, list) and value else None
        if key == "const":
            return _one_of_values((value,))
        if key in _COUNTS:
            return _count_check(key, value) if _is_count(value) else None
        if key in _BOUNDS:
            return _bound_check(key, value) if _is_number(value) else None
        if key == "anyOf":
            if not isinstance(value, list) or not value:
                return None
            branches = [self.node(sub) for sub in value]
            plain = [b for b in branches if b is not None]
            return _any_of(tuple(plain)) if len(plain) == len(branches) else None
        return None


def _anything(value: Any) -> bool:
    return True


#: The keywords `object_node` takes (with `type`, which must be "object").
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
#: The exact Python types of decoded JSON values of each type (an int subclass such as
#: bool is not an integer; a subclass of anything is "not known", left to the compiler).
_EXACT: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "object": (dict,),
    "array": (list,),
    "boolean": (bool,),
    "null": (type(None),),
    "integer": (int,),
    "number": (int, float),
}


def _bare_type(schema: Any) -> tuple[type, ...] | None:
    """The exact types of a schema that is one `type` and annotations, else None."""
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _EXACT:
        return None
    if any(key != "type" and key not in _ANNOTATIONS for key in schema):
        return None
    return _EXACT[kind]


def _object_check(
    typed: dict[str, tuple[type, ...]],
    others: dict[str, PlainCheck],
    required: tuple[str, ...],
    *,
    closed: bool,
    extra: PlainCheck | None,
) -> PlainCheck:
    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in required:
            if name not in value:
                return False
        for name, field in value.items():
            kinds = typed.get(name)
            if kinds is not None:
                if type(field) not in kinds:
                    return False
                continue
            sub = others.get(name)
            if sub is not None:
                if not sub(field):
                    return False
            elif closed or (extra is not None and not extra(field)):
                return False
        return True

    return check


def _all_of(checks: tuple[PlainCheck, ...]) -> PlainCheck:
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for one in checks:  # noqa: SIM110 - a loop: no generator object on every call
            if not one(value):
                return False
        return True

    return check


def _any_of(checks: tuple[PlainCheck, ...]) -> PlainCheck:
    def check(value: Any) -> bool:
        for one in checks:  # noqa: SIM110 - a loop: no generator object on every call
            if one(value):
                return True
        return False

    return check


def _type_check(kinds: tuple[str, ...]) -> PlainCheck:
    return _any_of(tuple(_OF_TYPE[kind] for kind in kinds))


def _properties_check(subs: dict[str, PlainCheck]) -> PlainCheck:
    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name, field in value.items():
            sub = subs.get(name)
            if sub is not None and not sub(field):
                return False
        return True

    return check


def _required_check(names: tuple[str, ...]) -> PlainCheck:
    return lambda value: not isinstance(value, dict) or all(name in value for name in names)


def _additional_check(named: frozenset[str], extra: PlainCheck | None) -> PlainCheck:
    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        others = [value[n] for n in value if n not in named]
        return not others or (extra is not None and all(extra(v) for v in others))

    return check


def _items_check(sub: PlainCheck) -> PlainCheck:
    return lambda value: not isinstance(value, list) or all(sub(item) for item in value)


def _one_of_values(options: tuple[Any, ...]) -> PlainCheck:
    return lambda value: any(_same(value, option) for option in options)


def _count_check(key: str, limit: int) -> PlainCheck:
    of_kind = _OF_TYPE["string" if key.endswith("Length") else "array" if key.endswith("Items") else "object"]

    def check(value: Any) -> bool:
        if not of_kind(value):
            return True
        size = len(value)
        return size >= limit if key.startswith("min") else size <= limit

    return check


def _bound_check(key: str, limit: float) -> PlainCheck:
    def check(value: Any) -> bool:
        if not _is_number(value):
            return True
        if key == "minimum":
            return bool(value >= limit)
        if key == "maximum":
            return bool(value <= limit)
        if key == "exclusiveMinimum":
            return bool(value > limit)
        return bool(value < limit)

    return check
