"""Pure environment logic: `${VAR}` expansion, .env parsing and env merge modes.

Nothing here reads a file or `os.environ`; callers pass text and lookups in, so every
rule is a plain function that tests call directly.
"""

import re
from collections.abc import Mapping
from typing import Literal, TypeVar

from assern.actors.config.spec import ConfigError

MergeMode = Literal["overlay", "replace"]
MERGE_MODES: tuple[MergeMode, ...] = ("overlay", "replace")

V = TypeVar("V")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ExpansionError(ValueError):
    """A string cannot be expanded: a malformed `${...}` or an undefined variable."""


#: How the problem of an undefined variable begins ("undefined variable 'X' ...", or
#: "undefined variables ..."): `assernctl doctor` tells these problems from the others.
UNDEFINED = "undefined variable"


class UndefinedVariableError(ExpansionError):
    """One or more variables are neither defined nor given a default.

    Attributes:
        names: The undefined variables, in order of first use.
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        quoted = ", ".join(repr(name) for name in names)
        noun = UNDEFINED if len(names) == 1 else f"{UNDEFINED}s"
        super().__init__(f"{noun} {quoted} (not set in the environment or any .env file)")


def expand_vars(text: str, lookup: Mapping[str, str]) -> str:
    """Expand `${VAR}`, `$VAR` and `${VAR:-default}` in `text`.

    `$$` is a literal `$`, and a `$` that starts no variable reference (as in "$5") is
    kept as it is. `${VAR:-default}` uses the default when VAR is undefined or empty;
    the default may itself hold references, which are expanded only when used.

    Args:
        text: The string to expand.
        lookup: Variable values (the environment and the .env files, already layered).

    Returns:
        The expanded string.

    Raises:
        UndefinedVariableError: a variable without a default is not in `lookup`; the
            error names every such variable in `text`, not just the first.
        ExpansionError: a `${` is unterminated or holds something other than a name
            with an optional `:-default`.
    """
    undefined: list[str] = []
    result = _expand(text, lookup, undefined)
    if undefined:
        raise UndefinedVariableError(tuple(dict.fromkeys(undefined)))
    return result


def _expand(text: str, lookup: Mapping[str, str], undefined: list[str]) -> str:
    out: list[str] = []
    i = 0
    while (dollar := text.find("$", i)) >= 0:
        out.append(text[i:dollar])
        following = text[dollar + 1 : dollar + 2]
        if following == "$":
            out.append("$")
            i = dollar + 2
        elif following == "{":
            end = _closing_brace(text, dollar + 2)
            if end < 0:
                # The text itself is not quoted: it may be a secret (an env or header value).
                raise ExpansionError(f"unterminated '${{' at character {dollar + 1}")
            out.append(_substitute(text[dollar + 2 : end], lookup, undefined))
            i = end + 1
        elif name := _NAME.match(text, dollar + 1):
            value = lookup.get(name.group())
            if value is None:
                undefined.append(name.group())
            else:
                out.append(value)
            i = name.end()
        else:
            out.append("$")
            i = dollar + 1
    out.append(text[i:])
    return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    """Index of the `}` closing a `${` whose body starts at `start`, or -1."""
    depth = 1
    i = start
    while i < len(text):
        pair = text[i : i + 2]
        if pair == "${":
            depth += 1
        if pair in ("$$", "${"):
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _substitute(body: str, lookup: Mapping[str, str], undefined: list[str]) -> str:
    name = _NAME.match(body)
    rest = body[name.end() :] if name else body
    if name is None or (rest and not rest.startswith(":-")):
        shown = f"'${{{body}}}'" if _NAME.fullmatch(body.split(":", 1)[0]) else "'${...}'"
        raise ExpansionError(f"unsupported reference {shown}: write ${{NAME}} or ${{NAME:-default}}")
    value = lookup.get(name.group())
    if not rest:
        if value is None:
            undefined.append(name.group())
            return ""
        return value
    if value:
        return value
    return _expand(rest[2:], lookup, undefined)


def merge_env(
    server_env: Mapping[str, V], project_env: Mapping[str, V] | None, mode: MergeMode
) -> dict[str, V]:
    """Combine a server's env with the active project's env.

    Args:
        server_env: The server's own env (from its global definition).
        project_env: The project's env for this server, or None when no project sets one
            (then the server env stays as it is, in both modes).
        mode: "overlay": project keys win, the server's other keys stay.
            "replace": the project env replaces the server env entirely.

    Returns:
        A new dict; the inputs are not changed. Values may be of any type (the resolver
        merges values together with their provenance).

    Raises:
        ValueError: `mode` is not a merge mode.
    """
    if mode not in MERGE_MODES:
        raise ValueError(f"expected one of 'overlay', 'replace', got {mode!r}")
    if project_env is None:
        return dict(server_env)
    if mode == "replace":
        return dict(project_env)
    return {**server_env, **project_env}


_ASSIGNMENT = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.]*)[ \t]*=")
_INLINE_COMMENT = re.compile(r"[ \t]#")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "$": "$"}


def parse_dotenv(text: str, *, file: str | None = None) -> dict[str, str]:
    """Parse a .env file: `KEY=VALUE` lines.

    Understood: blank lines and `#` comments; an optional `export ` prefix; spaces
    around `=`; unquoted values (trimmed; a `#` after whitespace starts a comment); single-quoted values
    (literal); double-quoted values (escapes `\\n \\r \\t \\\\ \\" \\$`). Quoted values
    may span lines. A later assignment of the same key wins. Values are taken as
    written: no `${VAR}` expansion happens in .env files.

    Args:
        text: The file's contents.
        file: The file's name, used in the error.

    Returns:
        The variables, in file order.

    Raises:
        ConfigError: some lines are not assignments; every bad line is listed.
    """
    values: dict[str, str] = {}
    problems: list[str] = []
    lines = text.removeprefix("\ufeff").splitlines()
    i = 0
    while i < len(lines):
        lineno, line = i + 1, lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ASSIGNMENT.match(line)
        if match is None:
            problems.append(f"expected KEY=VALUE @ line {lineno}")
            continue
        raw = line[match.end() :]
        rest = raw.lstrip(" \t")
        quote = rest[:1]
        if quote not in ("'", '"'):
            values[match.group(1)] = _INLINE_COMMENT.split(raw, maxsplit=1)[0].strip()
            continue
        body = rest[1:]
        while (end := _closing_quote(body, quote)) < 0 and i < len(lines):
            body += "\n" + lines[i]
            i += 1
        if end < 0:
            problems.append(f"unterminated {quote} quote @ line {lineno}")
            break
        tail = body[end + 1 :].strip()
        if tail and not tail.startswith("#"):
            problems.append(f"unexpected text after the closing quote @ line {lineno}")
            continue
        value = body[:end]
        values[match.group(1)] = _unescape(value) if quote == '"' else value
    if problems:
        raise ConfigError(file, tuple(problems))
    return values


def _closing_quote(body: str, quote: str) -> int:
    i = 0
    while i < len(body):
        if quote == '"' and body[i] == "\\":
            i += 2
            continue
        if body[i] == quote:
            return i
        i += 1
    return -1


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), value, flags=re.DOTALL)
