"""`use = "redact"`: secrets in a backend's answer never reach the model (and, with
`arguments = true`, secrets in a call's arguments never reach the backend).

    [[middleware]]
    use = "redact"
    options = { keys = ["password", "*token*", "*secret*"], patterns = ["corp-[0-9a-f]{32}"] }

Two ways to find a secret: by key (an object member whose name matches one of `keys`,
globs compared without case, has its whole value replaced), and by shape (every string
is searched for `patterns`, regular expressions, and, unless `builtin = false`, the
well-known token shapes in `BUILTIN`). A text block that holds JSON is searched by key
too. Images and audio are left alone. Each redaction is counted in one `redacted` log
event; the values never are.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import structlog

from assern.actors.gate.middlewares.options import read_options

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from assern.actors.gate.middleware import Call, Next

log = structlog.get_logger()

#: Token shapes common enough to look for by default (`builtin = false` turns them off).
BUILTIN: Mapping[str, str] = {
    "aws_access_key_id": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github_token": r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
    "github_pat": r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b",
    "api_key": r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
    "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "bearer": r"(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*",
}


@attrs.frozen
class Redactor:
    """The pure part: what a secret looks like, and how one is replaced.

    Attributes:
        keys: Globs over object member names (lower case) whose values are secrets.
        pattern: Every secret shape in one expression (None: none).
        replacement: What a secret becomes.
    """

    keys: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    replacement: str = "[REDACTED]"

    def secret_key(self, key: str) -> bool:
        lowered = key.lower()
        return any(fnmatchcase(lowered, glob) for glob in self.keys)

    def text(self, text: str) -> tuple[str, int]:
        """`text` with every secret shape replaced, and how many were."""
        if self.pattern is None:
            return text, 0
        return self.pattern.subn(self.replacement, text)

    def value(self, value: Any) -> tuple[Any, int]:
        """A JSON value with secret members and shapes replaced, and how many were."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            found, out = 0, {}
            for key, item in value.items():
                if isinstance(key, str) and self.secret_key(key) and item not in (None, ""):
                    out[key], found = self.replacement, found + 1
                else:
                    out[key], count = self.value(item)
                    found += count
            return out, found
        if isinstance(value, list):
            found, items = 0, []
            for item in value:
                redacted, count = self.value(item)
                items.append(redacted)
                found += count
            return items, found
        return value, 0

    def text_block(self, text: str) -> tuple[str, int]:
        """A text block: searched by key too when it holds a JSON object or array."""
        stripped = text.lstrip()
        if self.keys and stripped[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except ValueError:
                pass
            else:
                redacted, count = self.value(parsed)
                return (json.dumps(redacted, ensure_ascii=False), count) if count else (text, 0)
        return self.text(text)

    def result(self, result: types.CallToolResult) -> tuple[types.CallToolResult, int]:
        """A tool result with its text, embedded resources' text and structuredContent
        redacted (the same object back when nothing was found)."""
        found = 0
        content: list[types.ContentBlock] = []
        for block in result.content:
            if isinstance(block, types.TextContent):
                text, count = self.text_block(block.text)
                if count:
                    block = block.model_copy(update={"text": text})
            elif isinstance(block, types.EmbeddedResource) and isinstance(
                block.resource, types.TextResourceContents
            ):
                text, count = self.text_block(block.resource.text)
                if count:
                    block = block.model_copy(
                        update={"resource": block.resource.model_copy(update={"text": text})}
                    )
            else:
                count = 0
            found += count
            content.append(block)
        update: dict[str, Any] = {"content": content}
        if result.structured_content is not None:
            update["structured_content"], count = self.value(result.structured_content)
            found += count
        return (result.model_copy(update=update), found) if found else (result, 0)


def compile_patterns(patterns: Sequence[str], *, builtin: bool) -> re.Pattern[str] | None:
    """Every shape in one alternation (None: nothing to look for).

    Raises:
        ValueError: a pattern that is not a regular expression (naming it).
    """
    shapes = [*(BUILTIN.values() if builtin else ()), *patterns]
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a regular expression: {exc}") from None
    return re.compile("|".join(f"(?:{shape})" for shape in shapes)) if shapes else None


class Redact:
    """The middleware: arguments on the way in (if asked), the result on the way out."""

    def __init__(self, redactor: Redactor, *, arguments: bool, results: bool) -> None:
        self.redactor, self.arguments, self.results = redactor, arguments, results

    async def __call__(self, call: Call, next_: Next) -> types.CallToolResult:
        if self.arguments:
            arguments, count = self.redactor.value(dict(call.arguments))
            if count:
                log.info("redacted", server=call.server, tool=call.tool, where="arguments", count=count)
                call = call.with_arguments(arguments)
        result = await next_(call)
        if not self.results:
            return result
        redacted, count = self.redactor.result(result)
        if count:
            log.info("redacted", server=call.server, tool=call.tool, where="result", count=count)
        return redacted


def factory(options: Mapping[str, Any]) -> Redact:
    """Options: `keys` (globs), `patterns` (regular expressions), `builtin` (default
    true), `replacement` (default "[REDACTED]"), `arguments` (default false), `results`
    (default true)."""
    read = read_options(
        options,
        {
            "keys": list,
            "patterns": list,
            "builtin": bool,
            "replacement": str,
            "arguments": bool,
            "results": bool,
        },
    )
    redactor = Redactor(
        keys=tuple(key.lower() for key in read.get("keys", ())),
        pattern=compile_patterns(read.get("patterns", ()), builtin=read.get("builtin", True)),
        replacement=read.get("replacement", "[REDACTED]"),
    )
    arguments, results = read.get("arguments", False), read.get("results", True)
    if not arguments and not results:
        raise ValueError("with `arguments` and `results` both false it would redact nothing")
    return Redact(redactor, arguments=arguments, results=results)
