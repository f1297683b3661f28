"""cattrs structuring with strict types, and cattrs errors turned into `ConfigError`.

cattrs is lenient where a config file must not be: it turns `5` into `"5"`, `"yes"`
into `True` and the string `"abc"` into `("a", "b", "c")`. The converter here accepts a
value only when its TOML/JSON type is the declared one, runs the attrs validators of each
field while structuring (so every bad field of a table is reported, not just the first),
and rejects unknown keys.

Its validation errors are `ExceptionGroup`s (STYLE.md §1.7); they never leave this
module: `structure` converts them into one plain `ConfigError` listing every problem as
"what was expected @ key.path".
"""

import collections.abc
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
import cattrs.v
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override

from assern.actors.config.keypath import KeyPath, at
from assern.actors.config.spec import ConfigError

T = TypeVar("T")

StructureHook = Callable[[Any, Any], Any]


class Invalid(ValueError):
    """A value is not what its key expects; the message is shown to the user as it is."""


def show(value: object) -> str:
    """Render a config value the way the user wrote it, for "got ..." in messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return str(value)


class WrongKind(Invalid):
    """A value of the wrong kind: "expected WHAT, got VALUE".

    It keeps the value so that `describe_error` can leave it out where it may be a secret
    (under an `env` or `headers` table).
    """

    def __init__(self, what: str, value: object) -> None:
        super().__init__(f"expected {what}, got {show(value)}")
        self.what = what
        self.value = value

    def hidden(self) -> str:
        """The message without the value itself: "expected WHAT, got a string (hidden)"."""
        kind = "a string (value hidden)" if isinstance(self.value, str) else _kind(self.value)
        return f"expected {self.what}, got {kind}"


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    return show(value) if value is None or isinstance(value, Mapping | list | tuple) else "a value"


def expected(what: str, value: object) -> WrongKind:
    """The error for a value of the wrong kind: "expected WHAT, got VALUE"."""
    return WrongKind(what, value)


#: Tables whose values may be secrets: a wrong value under them is described, never shown.
SECRET_TABLES = frozenset({"env", "headers"})


def _structure_str(value: object, _: object) -> str:
    if not isinstance(value, str):
        raise expected("a string", value)
    return value


def _structure_int(value: object, _: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise expected("an integer", value)
    return value


def _structure_float(value: object, _: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise expected("a number", value)
    return value  # an int stays an int, so messages show the number as it was written


def _structure_bool(value: object, _: object) -> bool:
    if not isinstance(value, bool):
        raise expected("true or false", value)
    return value


def _is_union(tp: object) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType)


def _is_optional(tp: object) -> bool:
    return _is_union(tp) and type(None) in get_args(tp)


def _is_homogeneous_tuple(tp: object) -> bool:
    args = get_args(tp)
    return get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def _is_mapping(tp: object) -> bool:
    return get_origin(tp) in (collections.abc.Mapping, dict)


def _is_literal(tp: object) -> bool:
    return get_origin(tp) is Literal


def _is_attrs_class(tp: object) -> bool:
    return isinstance(tp, type) and attrs.has(tp)


def make_converter() -> cattrs.Converter:
    """Build the strict converter used for every config file.

    Returns:
        A `cattrs.Converter` with `forbid_extra_keys=True` and strict hooks for str, int,
        float, bool, Literal, optional values, `tuple[X, ...]` (from a list only),
        `Mapping[str, X]` (from a table only) and attrs classes (validators run per
        field while structuring).
    """
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(bool, _structure_bool)

    def literal_hook(tp: Any) -> StructureHook:
        choices = get_args(tp)
        wanted = ", ".join(repr(choice) for choice in choices)

        def structure_literal(value: object, _: object) -> object:
            if not any(type(value) is type(c) and value == c for c in choices):
                raise expected(f"one of {wanted}", value)
            return value

        return structure_literal

    def optional_hook(tp: Any) -> StructureHook:
        rest = tuple(arg for arg in get_args(tp) if arg is not type(None))
        inner = rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007 (runtime union)
        inner_hook = converter.get_structure_hook(inner)

        def structure_optional(value: object, _: object) -> object:
            return None if value is None else inner_hook(value, inner)

        return structure_optional

    def tuple_hook(tp: Any) -> StructureHook:
        item_type = get_args(tp)[0]
        item_hook = converter.get_structure_hook(item_type)

        def structure_tuple(value: object, _: object) -> tuple[object, ...]:
            if not isinstance(value, list | tuple):
                raise expected("a list", value)
            items: list[object] = []
            errors: list[Exception] = []
            for index, item in enumerate(value):
                try:
                    items.append(item_hook(item, item_type))
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"@ index {index}", index, item_type))
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
            return tuple(items)

        return structure_tuple

    def mapping_hook(tp: Any) -> StructureHook:
        value_type = get_args(tp)[1]
        value_hook = converter.get_structure_hook(value_type)

        def structure_mapping(value: object, _: object) -> dict[str, object]:
            if not isinstance(value, Mapping):
                raise expected("a table", value)
            out: dict[str, object] = {}
            errors: list[Exception] = []
            for key, item in value.items():
                try:
                    out[_structure_str(key, str)] = value_hook(item, value_type)
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"@ key {key!r}", key, value_type))
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
            return out

        return structure_mapping

    def attrs_hook(cls: Any) -> StructureHook:
        attrs.resolve_types(cls)
        overrides: dict[str, Any] = {
            field.name: override(struct_hook=_validating_hook(converter, field))
            for field in attrs.fields(cls)
            if field.validator is not None
        }
        generated = make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

        def structure_attrs(value: object, _: object) -> object:
            if not isinstance(value, Mapping):
                raise expected("a table", value)
            return generated(value, cls)

        return structure_attrs

    converter.register_structure_hook_factory(_is_attrs_class, attrs_hook)
    converter.register_structure_hook_factory(_is_mapping, mapping_hook)
    converter.register_structure_hook_factory(_is_homogeneous_tuple, tuple_hook)
    converter.register_structure_hook_factory(_is_optional, optional_hook)
    converter.register_structure_hook_factory(_is_literal, literal_hook)
    return converter


def _validating_hook(converter: cattrs.Converter, field: "attrs.Attribute[Any]") -> StructureHook:
    """Structure one field and run its attrs validator, so the error names the field."""
    field_type = field.type
    validator = field.validator
    assert validator is not None  # only called for fields with one

    def structure_field(value: object, _: object) -> object:
        result = converter.get_structure_hook(field_type)(value, field_type)
        validator(None, field, result)
        return result

    return structure_field


CONVERTER = make_converter()


def register_union(tp: Any, hook: StructureHook) -> None:
    """Give the shared converter a hook for one union type (which cattrs leaves to us)."""
    CONVERTER.register_structure_hook_factory(lambda t: t == tp, lambda _: hook)


def structure(data: object, cls: type[T], *, file: str, prefix: KeyPath = ()) -> T:
    """Structure `data` into `cls`, or raise one `ConfigError` naming every problem.

    Args:
        data: The decoded TOML or JSON value.
        cls: The attrs class (or any type the converter knows) to build.
        file: The file `data` came from, named in the error.
        prefix: Key path of `data` inside that file, prepended to every problem's path.

    Returns:
        The structured value.

    Raises:
        ConfigError: with one "what was expected @ key.path" line per problem.
    """
    try:
        return CONVERTER.structure(data, cls)
    except (BaseValidationError, Invalid) as exc:
        raise ConfigError(file, tuple(describe_error(exc, prefix))) from exc


def parse_toml(text: str, *, file: str) -> dict[str, Any]:
    """Parse TOML text into plain data.

    Raises:
        ConfigError: a syntax error; the message gives line and column, never the text.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, (f"invalid TOML: {exc}",)) from exc


def loads_toml(text: str, cls: type[T], *, file: str) -> T:
    """Parse TOML text and structure it into `cls`.

    Raises:
        ConfigError: a syntax error (the message gives line and column) or every
            structuring problem of the document.
    """
    return structure(parse_toml(text, file=file), cls, file=file)


def describe_error(exc: BaseException, path: KeyPath = ()) -> list[str]:
    """Flatten a (possibly grouped) structuring error into "problem @ key.path" lines.

    Args:
        exc: A cattrs validation group, or a single error raised by a hook or validator.
        path: Key path at which `exc` was raised.

    Returns:
        One line per leaf problem, in the order cattrs met them.
    """
    if isinstance(exc, ClassValidationError | IterableValidationError):
        with_notes, without = exc.group_exceptions()
        problems: list[str] = []
        for sub, note in with_notes:
            key = note.name if isinstance(note, AttributeValidationNote) else note.index
            problems += describe_error(sub, (*path, key))
        for sub in without:
            problems += describe_error(sub, path)
        return problems
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [field.name for field in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        return [at(_unknown_key(key, known), path) for key in sorted(exc.extra_fields)]
    if isinstance(exc, WrongKind) and any(part in SECRET_TABLES for part in path if isinstance(part, str)):
        return [at(exc.hidden(), path)]
    return [at(_describe(exc), path)]


def _unknown_key(key: str, known: list[str]) -> str:
    import difflib  # only here: not loaded until needed

    guess = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    return f"unknown key {key!r}{hint}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, Invalid):
        return str(exc)
    if isinstance(exc, KeyError):
        return "missing required key"
    return cattrs.v.format_exception(exc, None)
