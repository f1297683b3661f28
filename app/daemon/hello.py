"""The line a connection to the workstation daemon starts with: who the client is.

`assern serve`, when a daemon runs, connects to the daemon's MCP socket and first sends
one `assern/hello` notification: its working folder, its environment, and the
`--config`, `--project` and `--profile` it was given. The daemon resolves that
connection's configuration from them exactly as a separate instance started there would
(layers, project detection, `.env` files, profiles), and serves it that view. The rest of
the connection is the client's own MCP bytes, unchanged.

The environment is sent whole: the daemon cannot know which variables a configuration
refers to before it resolves it. It stays in the daemon's memory, for that resolution
(and the backends a configuration starts), on a socket only the same user reaches.

The hello also says which assern sends it: `protocol`, the number of this socket's
protocol (the hello, the daemon's one-line answer, then the client's MCP bytes), and
`build`, the sending install's build id (app/daemon/identity.py). Protocol 1 was the
first daemon's hello (its number under `version`, no build); protocol 2 adds `protocol`
and `build`, to the hello and to the daemon's answer. A daemon refuses a protocol it
does not read with what to do (`Unsupported`); a shim of another build with a protocol
it reads simply joins.

Standard library only: `app/quick.py` builds this line before anything else is imported.
"""

from __future__ import annotations

import json
import os
import sys

from assern.actors.config.home import assern_home_folder
from assern.app.daemon.identity import build_id

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping
    from typing import Any

HELLO_METHOD = "assern/hello"
#: The daemon's slot in the socket folder: `daemon.sock` (MCP), `daemon.ctl` (control).
DAEMON_SLOT = "daemon"
#: This socket's protocol: bumped when the hello or the daemon's answer changes in a way
#: the other side cannot read.
PROTOCOL = 2
#: The oldest and the newest protocol this daemon reads.
PROTOCOLS = (2, 2)
#: The longest hello line the daemon reads (an environment of a few thousand variables).
MAX_HELLO = 1 << 20
#: The longest answer to a hello a client reads.
MAX_WELCOME = 1 << 20


def hello_line(
    *,
    cwd: str,
    environ: Mapping[str, str],
    config: str | None,
    project: str | None,
    profile: str | None,
    build: str | None = None,
    resumes: bool = False,
) -> bytes:
    """The `assern/hello` notification, as one JSON line, with this socket's protocol and
    `build` (by default this install's build id, its cache in `environ`'s `$ASSERN_HOME`).
    `resumes`: the sender moves its session to a successor when told (app/handover.py)."""
    params: dict[str, object] = {
        "protocol": PROTOCOL,
        "build": build if build is not None else build_id(assern_home_folder(environ)),
        "cwd": cwd,
        "env": dict(environ),
        "config": config,
        "project": project,
        "profile": profile,
    }
    if resumes:
        params["resumes"] = True
    message = {"jsonrpc": "2.0", "method": HELLO_METHOD, "params": params}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def read_welcome(sock: socket.socket) -> dict[str, Any] | None:
    """The daemon's one-line answer to a hello (read a byte at a time: nothing after it is
    ours to take), or None when it hung up, timed out or said something else."""
    line = bytearray()
    try:
        while not line.endswith(b"\n") and len(line) < MAX_WELCOME:
            byte = sock.recv(1)
            if not byte:
                return None
            line += byte
        answer = json.loads(line)
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


#: app/instance.py's longest socket file name, for the same choice of folder.
_LONGEST_NAME = "x" * (32 + 1 + 12) + ".sock"


def socket_folder(
    assern_home: str, environ: Mapping[str, str], uid: int, platform: str = sys.platform
) -> str | None:
    """The folder of the sockets of `assern_home`, chosen as app/instance.py's
    `socket_directory` chooses it (`$ASSERN_HOME/run`, else a short private fallback);
    None when no folder is short enough. Standard library only."""
    limit = 108 if platform.startswith("linux") else 104

    def fits(folder: str) -> bool:
        return len(os.fsencode(os.path.join(folder, _LONGEST_NAME))) < limit

    home = os.path.normpath(assern_home)
    run = os.path.join(home, "run")
    if fits(run):
        return run
    import hashlib  # only for a home whose run folder is too long (hashlib costs memory)

    tag = hashlib.sha256(home.encode()).hexdigest()[:10]
    candidates = []
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        candidates.append(os.path.join(runtime, f"assern-{tag}"))
    candidates.append(os.path.join("/tmp", f"assern-{uid}", tag))
    return next((folder for folder in candidates if fits(folder)), None)


class BadHello(ValueError):
    """A first line that is not a valid `assern/hello`."""


def protocols_text(protocols: tuple[int, int] = PROTOCOLS) -> str:
    """`protocol 2`, or `protocols 2-3` for a range."""
    low, high = protocols
    return f"protocol {low}" if low == high else f"protocols {low}-{high}"


class Unsupported(BadHello):
    """A hello of a protocol this daemon does not read: the message says what to do."""

    def __init__(self, protocol: object, build: object, daemon_build: str) -> None:
        shown = build if isinstance(build, str) else "unknown"
        newer = isinstance(protocol, int) and protocol > PROTOCOLS[1]
        fix = (
            "run `assernctl shutdown` to stop the daemon, then start `assern daemon` of this install"
            if newer
            else "upgrade this assern to the daemon's build, or run `assernctl shutdown` to stop the daemon"
        )
        super().__init__(
            f"this assern (build {shown}, protocol {protocol}) cannot join the running daemon "
            f"(build {daemon_build}, {protocols_text()}); {fix}"
        )
        self.protocol = protocol
        self.build = build


def _protocol(params: Mapping[str, Any]) -> object:
    """The hello's protocol; 1 for the first daemon's hello (`version` 1, no `protocol`)."""
    if "protocol" not in params and params.get("version") == 1:
        return 1
    return params.get("protocol")


def read_hello(line: bytes, *, daemon_build: str) -> dict[str, Any]:
    """The hello's parameters, checked by the daemon of build `daemon_build`.

    Raises:
        Unsupported: its protocol is one this daemon does not read (what to do).
        BadHello: what else is wrong with it.
    """
    try:
        message = json.loads(line)
    except ValueError:
        raise BadHello("the first line is not JSON") from None
    if not isinstance(message, dict) or message.get("method") != HELLO_METHOD:
        raise BadHello(f"a connection to the daemon starts with an {HELLO_METHOD} notification")
    params = message.get("params")
    if not isinstance(params, dict):
        raise BadHello(f"{HELLO_METHOD} has no params object")
    protocol = _protocol(params)
    if protocol is None or isinstance(protocol, bool) or not isinstance(protocol, int):
        raise BadHello(f"{HELLO_METHOD} protocol must be an integer (this daemon reads {protocols_text()})")
    if not PROTOCOLS[0] <= protocol <= PROTOCOLS[1]:
        raise Unsupported(protocol, params.get("build"), daemon_build)
    if not isinstance(params.get("build"), str):
        raise BadHello(f"{HELLO_METHOD} build must be a string (the sending assern's build id)")
    check_context(params)
    return params


def check_context(params: Mapping[str, Any]) -> None:
    """Check what a connection states to have its configuration resolved: its working
    folder, environment and `--config`, `--project` and `--profile`.

    Raises:
        BadHello: what is wrong with them.
    """
    cwd, env = params.get("cwd"), params.get("env")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        raise BadHello("cwd must be an absolute path")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise BadHello("env must map names to strings")
    for key in ("config", "project", "profile"):
        if not isinstance(params.get(key), str | None):
            raise BadHello(f"{key} must be a string or null")
