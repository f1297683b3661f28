"""Pure: the safety rules of one tool in one view: is it denied, read-only-refused, does
its call need the client's confirmation, and how are its arguments validated.

Three layers say something: `[settings]`, the client's `[profiles.NAME]` and the
tool's `[servers.NAME]`. `deny` and `confirm` add up across them; `read_only` holds when
any says so; `validate` is the server's word, else the profile's, else the settings',
else "strict" for grouped tools and "warn" for the others.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

import attrs

from assern.actors.config.spec import DESTRUCTIVE, CallRules, ValidateMode

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import mcp_types as types


def combine(*layers: CallRules) -> CallRules:
    """Rules of several layers, lowest first (see the module's rules)."""
    deny: tuple[str, ...] = ()
    confirm: tuple[str, ...] = ()
    read_only = False
    validate: ValidateMode | None = None
    for layer in layers:
        deny += tuple(p for p in layer.deny if p not in deny)
        confirm += tuple(p for p in layer.confirm if p not in confirm)
        read_only = read_only or layer.read_only
        validate = layer.validate if layer.validate is not None else validate
    return CallRules(deny=deny, read_only=read_only, validate=validate, confirm=confirm)


def _matches(names: Iterable[str], patterns: Sequence[str]) -> str | None:
    for pattern in patterns:
        if pattern != DESTRUCTIVE and any(fnmatch.fnmatchcase(name, pattern) for name in names):
            return pattern
    return None


def is_read_only(tool: types.Tool) -> bool:
    """The tool says it changes nothing (`readOnlyHint: true`)."""
    return tool.annotations is not None and tool.annotations.read_only_hint is True


def is_destructive(tool: types.Tool) -> bool:
    """The tool may change the world destructively: MCP's default for a tool that is not
    read-only and does not say `destructiveHint: false`."""
    if is_read_only(tool):
        return False
    hint = tool.annotations.destructive_hint if tool.annotations is not None else None
    return hint is not False


@attrs.frozen(kw_only=True)
class Refusal:
    """Why a tool is neither listed nor callable in a view.

    Attributes:
        server: Its server.
        rule: "deny" or "read_only".
        reason: The sentence the caller reads.
    """

    server: str
    rule: str
    reason: str


def refusal(rules: CallRules, names: Sequence[str], server: str, tool: types.Tool) -> Refusal | None:
    """Whether `rules` keep the tool (known by `names`: exposed, SERVER_TOOL, its own)
    out of the view, and why."""
    pattern = _matches(names, rules.deny)
    if pattern is not None:
        return Refusal(server=server, rule="deny", reason=f"it is denied by the rule `deny = {pattern!r}`")
    if rules.read_only and not is_read_only(tool):
        return Refusal(
            server=server,
            rule="read_only",
            reason="only read-only tools are served here (`read_only = true`) and it does not "
            "declare `readOnlyHint: true`",
        )
    return None


def needs_confirm(rules: CallRules, names: Sequence[str], tool: types.Tool) -> bool:
    """Whether a call of the tool waits for the calling client's yes."""
    if _matches(names, rules.confirm) is not None:
        return True
    return DESTRUCTIVE in rules.confirm and is_destructive(tool)


def validate_mode(rules: CallRules, *, grouped: bool) -> ValidateMode:
    """How the tool's calls are validated (the default depends on the exposure)."""
    if rules.validate is not None:
        return rules.validate
    return "strict" if grouped else "warn"
