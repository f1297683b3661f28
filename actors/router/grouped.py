"""Pure: grouped exposure, one tool per server (or per `[groups.NAME]`) with an `action`.

A grouped tool's inputSchema is a flat `type: object` (what every client and model API
accepts at the top level): a required `action` whose `enum` names the actions, and the
union of the actions' parameters. Each parameter's description says which actions take
it (`(always required)`, `Required for: a, b`, `Required for: a. For: b`, `For: a, b`).
A parameter whose schema differs between actions becomes an `anyOf` of its schemas,
each branch titled with its actions, so the listed schema stays true for every action;
the exact per-action check is assern's: the call is validated against the chosen
action's own inputSchema (strictly, by default) after `action` is taken out.

The description lists the actions one line each (grouped by server in a cross-server
group), with `[DESTRUCTIVE]` on those that may change the world destructively; in
"toon" format the list is a TOON table when that is shorter. The annotations are the
most cautious of the actions'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types

from assern.actors.gate.rules import is_destructive, is_read_only

if TYPE_CHECKING:
    from assern.actors.config.spec import DescriptionFormat

ACTION = "action"
DESTRUCTIVE_MARK = "[DESTRUCTIVE]"
#: the longest action line of a description, in characters
LINE_LIMIT = 120


@attrs.frozen(kw_only=True)
class Action:
    """One action of a grouped tool: its key and the flat tool it calls.

    Attributes:
        key: What `action` takes: the tool's own name, or `server.tool` in a
            cross-server group.
        name: The flat tool's exposed name (where the call is routed).
        server: Its server.
        tool: Its definition as the backend listed it.
    """

    key: str
    name: str
    server: str
    tool: types.Tool


@attrs.frozen(kw_only=True)
class GroupRoute:
    """A grouped tool: its listed definition and its actions by key."""

    name: str
    tool: types.Tool
    actions: Mapping[str, Action]

    def resolve(self, arguments: Mapping[str, Any] | None) -> tuple[Action, dict[str, Any]] | str:
        """The action a call chose and its arguments without `action`, or why the call
        cannot be routed (the text of an error result)."""
        arguments = dict(arguments or {})
        key = arguments.pop(ACTION, None)
        if isinstance(key, str) and key in self.actions:
            return self.actions[key], arguments
        keys = ", ".join(self.actions)
        if key is None:
            return f"{self.name}: `action` is required; it is one of: {keys}."
        import difflib  # only here: not loaded until needed

        close = difflib.get_close_matches(str(key), list(self.actions), n=1, cutoff=0.5)
        hint = f" Did you mean `{close[0]}`?" if close else ""
        return f"{self.name}: unknown action {json.dumps(key)}.{hint} Actions: {keys}."


def _first_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= LINE_LIMIT else line[: LINE_LIMIT - 1] + "…"


def action_line(action: Action) -> str:
    """What the description says of one action: its first line, marked if destructive."""
    text = _first_line(action.tool.description)
    if is_destructive(action.tool):
        text = f"{text} {DESTRUCTIVE_MARK}" if text else DESTRUCTIVE_MARK
    return text


def _toon_value(text: str) -> str:
    """One TOON table cell: bare when unambiguous, else a JSON string."""
    needs_quotes = (
        not text
        or text != text.strip()
        or any(ch in text for ch in ',:"\\[]{}\n\r\t')
        or text in ("true", "false", "null")
        or text.startswith("-")
        or _looks_numeric(text)
    )
    return json.dumps(text, ensure_ascii=False) if needs_quotes else text


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _sections(actions: Sequence[Action]) -> list[tuple[str | None, list[Action]]]:
    servers = list(dict.fromkeys(action.server for action in actions))
    if len(servers) == 1:
        return [(None, list(actions))]
    return [(server, [a for a in actions if a.server == server]) for server in servers]


def actions_text(actions: Sequence[Action]) -> str:
    lines = ["Actions:"]
    for server, members in _sections(actions):
        indent = ""
        if server is not None:
            lines.append(f"{server}:")
            indent = "  "
        lines += [f"{indent}- {a.key}: {action_line(a)}" for a in members]
    return "\n".join(lines)


def actions_toon(actions: Sequence[Action]) -> str:
    lines = [f"actions[{len(actions)}]{{action,does}}:"]
    lines += [f"  {_toon_value(a.key)},{_toon_value(action_line(a))}" for a in actions]
    return "\n".join(lines)


def group_description(head: str, actions: Sequence[Action], fmt: DescriptionFormat) -> str:
    """The grouped tool's description: `head`, then its actions (TOON when asked for and
    shorter than the text form)."""
    listing = actions_text(actions)
    if fmt == "toon":
        table = actions_toon(actions)
        # Compared as the tools/list JSON carries them (TOON's quotes are escaped there).
        if len(json.dumps(table)) < len(json.dumps(listing)):
            listing = table
    return f"{head}\n\n{listing}"


def _without_description(schema: Any) -> Any:
    if isinstance(schema, Mapping):
        return {k: v for k, v in schema.items() if k not in ("description", "title")}
    return schema


def _usage(required: Sequence[str], optional: Sequence[str], every: int) -> str:
    if len(required) == every:
        return "(always required)"
    parts = []
    if required:
        parts.append("Required for: " + ", ".join(required))
    if optional:
        parts.append("For: " + ", ".join(optional))
    return ". ".join(parts)


def merged_schema(actions: Sequence[Action]) -> dict[str, Any]:
    """The grouped tool's inputSchema (see the module's rules)."""
    uses: dict[str, list[tuple[str, Any, bool]]] = {}
    for action in actions:
        schema = action.tool.input_schema
        declared = schema.get("properties")
        needed = set(schema.get("required") or ())
        for name, sub in (declared if isinstance(declared, Mapping) else {}).items():
            if name == ACTION:
                continue  # a backend's own `action` parameter cannot share the discriminator
            uses.setdefault(name, []).append((action.key, sub, name in needed))
    properties: dict[str, Any] = {
        ACTION: {
            "type": "string",
            "enum": [action.key for action in actions],
            "description": "Which action to run (see the list in the tool's description).",
        }
    }
    always: list[str] = [ACTION]
    for name, used in uses.items():
        distinct: dict[str, tuple[Any, list[str]]] = {}
        for key, sub, _ in used:
            shape = json.dumps(_without_description(sub), sort_keys=True)
            distinct.setdefault(shape, (_without_description(sub), []))[1].append(key)
        described = next(
            (sub["description"] for _, sub, _ in used if isinstance(sub, Mapping) and sub.get("description")),
            None,
        )
        merged: dict[str, Any]
        if len(distinct) == 1:
            merged = dict(_without_description(used[0][1]) if isinstance(used[0][1], Mapping) else {})
        else:
            merged = {
                "anyOf": [
                    {**shape, "title": "for " + ", ".join(keys)} if isinstance(shape, Mapping) else shape
                    for shape, keys in distinct.values()
                ]
            }
        required = [key for key, _, needed in used if needed]
        optional = [key for key, _, needed in used if not needed]
        usage = _usage(required, optional, len(actions))
        merged["description"] = f"{described} {usage}" if described else usage
        properties[name] = merged
        if len(required) == len(actions):
            always.append(name)
    return {"type": "object", "properties": properties, "required": always}


def merged_annotations(actions: Sequence[Action]) -> types.ToolAnnotations:
    """The most cautious of the actions' annotations."""
    tools = [action.tool for action in actions]

    def hint(tool: types.Tool, name: str) -> bool | None:
        return getattr(tool.annotations, name) if tool.annotations is not None else None

    return types.ToolAnnotations(
        read_only_hint=all(is_read_only(t) for t in tools),
        destructive_hint=any(is_destructive(t) for t in tools),
        idempotent_hint=all(hint(t, "idempotent_hint") is True for t in tools),
        open_world_hint=any(hint(t, "open_world_hint") is not False for t in tools),
    )


def build_group(name: str, head: str, actions: Sequence[Action], fmt: DescriptionFormat) -> GroupRoute:
    """The grouped tool `name` over `actions` (in their order)."""
    tool = types.Tool(
        name=name,
        description=group_description(head, actions, fmt),
        input_schema=merged_schema(actions),
        annotations=merged_annotations(actions),
    )
    return GroupRoute(name=name, tool=tool, actions={action.key: action for action in actions})


def server_head(server: str, instructions: str | None, count: int) -> str:
    """The first line of a server's grouped tool."""
    head = f"The {count} tools of the '{server}' server: set `action` to one of them."
    about = _first_line(instructions)
    return f"{about}\n{head}" if about else head
