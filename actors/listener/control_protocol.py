"""The control socket's wire format: one JSON object a line each way (docs/operations.md).

A request is `{"v": 1, "command": "status", "id": 7, ...arguments}`; `id` is optional
and echoed. A reply is `{"v": 1, "id": 7, "ok": true, "result": {...}}` or
`{"v": 1, "id": 7, "ok": false, "error": {"code": "unknown_command", "message": "...",
"data": ...}}`. A line that is not JSON, not an object, lacks the version or names an
unknown command gets an error reply and the connection goes on.

Pure: parsing and encoding only, so `assernctl` imports it without the server side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from assern.actors.jsonrpc import framing
from assern.actors.listener.socket_basics import PROTOCOL_VERSION

#: Every command, with what it does (sent back with an `unknown_command` error).
COMMANDS: Mapping[str, str] = {
    "hello": "who this instance is: protocol, pid, project, config files, configuration fingerprint",
    "status": "the instance and every backend (docs/operations.md, for the fields)",
    "list": "the aggregated tools (of one profile's view with `profile`)",
    "search": "the tools that best match a task: query, limit (1-50), server, profile, after, explain",
    "call": "call a tool: tool, arguments (object), optional server (then tool is its own name)",
    "restart": "restart one backend: server",
    "stop": "stop one backend: server",
    "start": "start one backend: server",
    "reload": "resolve the configuration again and apply the difference",
    "shutdown": "stop the instance (every backend gets its graceful stop)",
    "supersede": "a successor took the daemon's sockets (build, pid, deadline): drain, then stop",
    "contexts": "for a successor: what each session stated in its hello, and each view's running backends",
    "context_reindex": "context servers re-check their root: optional server, full (rebuild)",
    "web": "serve the status page (started by the first web) and mint a one-time sign-in address",
}

# Error codes: stable strings that scripts may match on.
PARSE_ERROR = "parse_error"
INVALID_REQUEST = "invalid_request"
UNSUPPORTED_VERSION = "unsupported_version"
UNKNOWN_COMMAND = "unknown_command"
INVALID_ARGUMENTS = "invalid_arguments"
UNKNOWN_SERVER = "unknown_server"
UNKNOWN_TOOL = "unknown_tool"
CALL_FAILED = "call_failed"
COMMAND_FAILED = "command_failed"
RELOAD_FAILED = "reload_failed"
TIMEOUT = "timeout"
FORBIDDEN = "forbidden"
INTERNAL_ERROR = "internal_error"


class ControlFailure(Exception):
    """A command cannot be done; becomes an error reply with this code and message."""

    def __init__(self, code: str, message: str, data: Any = None, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id


@attrs.frozen
class Command:
    """One parsed request.

    Attributes:
        name: The command, one of `COMMANDS`.
        args: Every other field of the request object.
        id: The request's `id`, echoed in the reply (None when absent).
    """

    name: str
    args: Mapping[str, Any]
    id: Any = None


def _echoable(value: Any) -> Any:
    return value if isinstance(value, str | int | float) and not isinstance(value, bool) else None


def parse_command(line: bytes) -> Command:
    """Decode and check one request line.

    Raises:
        ControlFailure: the line is not JSON, not an object, has no or another protocol
            version, or names no known command.
    """
    try:
        raw = framing.loads(line)
    except framing.TooDeep as exc:
        raise ControlFailure(
            INVALID_REQUEST, str(exc), request_id=_echoable(framing.recover_id(line))
        ) from None
    except ValueError:
        raise ControlFailure(PARSE_ERROR, "the line is not valid JSON") from None
    if not isinstance(raw, dict):
        example = '{"v": 1, "command": "status"}'
        raise ControlFailure(INVALID_REQUEST, f"a request is a JSON object, e.g. {example}")
    request_id = _echoable(raw.get("id"))
    version = raw.get("v")
    if version is None:
        raise ControlFailure(
            INVALID_REQUEST,
            f'the request has no protocol version: add "v": {PROTOCOL_VERSION}',
            {"supported": [PROTOCOL_VERSION]},
            request_id,
        )
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise ControlFailure(
            UNSUPPORTED_VERSION,
            f"protocol version {json.dumps(version)} is not supported; this one speaks {PROTOCOL_VERSION}",
            {"supported": [PROTOCOL_VERSION]},
            request_id,
        )
    name = raw.get("command")
    if not isinstance(name, str):
        raise ControlFailure(INVALID_REQUEST, 'the request has no "command" string', None, request_id)
    if name not in COMMANDS:
        raise ControlFailure(
            UNKNOWN_COMMAND,
            f"unknown command {name!r}; known: {', '.join(COMMANDS)}",
            {"commands": list(COMMANDS)},
            request_id,
        )
    args = {k: v for k, v in raw.items() if k not in ("v", "id", "command")}
    return Command(name=name, args=args, id=request_id)


def ok_line(request_id: Any, result: Any) -> bytes:
    reply = {"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": result}
    return json.dumps(reply, default=str).encode() + b"\n"


def error_line(request_id: Any, code: str, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    reply = {"v": PROTOCOL_VERSION, "id": request_id, "ok": False, "error": error}
    return json.dumps(reply, default=str).encode() + b"\n"


def string_arg(command: Command, key: str, *, required: bool = True) -> str | None:
    """A string argument of `command`.

    Raises:
        ControlFailure: it is missing (and required) or not a non-empty string.
    """
    value = command.args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ControlFailure(
            INVALID_ARGUMENTS, f'{command.name} needs "{key}": a non-empty string', None, command.id
        )
    return value


def object_arg(command: Command, key: str) -> dict[str, Any]:
    """An optional JSON-object argument of `command` ({} when absent).

    Raises:
        ControlFailure: it is present but not an object.
    """
    value = command.args.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ControlFailure(INVALID_ARGUMENTS, f'"{key}" must be a JSON object', None, command.id)
    return value
