"""Where a shared assern instance lives: its identity, its socket names, its private folder.

One primary serves every `assern serve` whose resolved configuration is the same
(docs/operations.md, "Instance sharing"). Here are the pieces that decide which one that is:

- `fingerprint`: a hash of what makes a configuration itself (project, settings, config
  files, servers with the environment the configuration gives them). The inherited
  process environment is left out: two shells differ in it and must still share.
- Slots: an instance listens on `<slot>.sock` (MCP) and `<slot>.ctl` (control). A
  configuration's home slot is named after its project (`assern` with none); when the
  home slot is held by another configuration of the same project, its own slot adds a
  hash of its fingerprint (`work-3f9a0c1b2d4e`).
- `socket_directory`: `$ASSERN_HOME/run`, or, when socket paths there would be longer
  than the platform allows, a short private folder under the runtime dir.
- `ensure_private_dir`, `InstanceLock` (an flock beside the sockets, so racing starts
  elect exactly one primary) and `probe` (is anybody listening at a socket path?).

Everything but the last three is pure: a function of its arguments.
"""

from __future__ import annotations

import enum
import errno
import hashlib
import json
import os
import re
import socket
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from assern.app.instance_lock import NO_SHARING_VAR as NO_SHARING_VAR
from assern.app.instance_lock import InstanceError as InstanceError
from assern.app.instance_lock import InstanceLock as InstanceLock
from assern.app.instance_lock import sharing_enabled as sharing_enabled

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assern.actors.config.spec import ResolvedConfig, ServerSpec

HOME_STEM = "assern"
MAX_STEM = 32
HASH_CHARS = 12
MCP_SUFFIX = ".sock"
CONTROL_SUFFIX = ".ctl"
LOCK_SUFFIX = ".lock"
#: The longest socket file name a slot can have: a full stem, a dash and a hash.
LONGEST_NAME = "x" * (MAX_STEM + 1 + HASH_CHARS) + MCP_SUFFIX


# ---------------------------------------------------------------- identity


def _short_hash(text: str, chars: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def _server_identity(spec: ServerSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for field in attrs.fields(type(spec)):
        if field.name in ("env", "env_keys_from"):
            continue
        value = getattr(spec, field.name)
        doc[field.name] = attrs.asdict(value) if attrs.has(type(value)) else value
    # Only what the configuration gives the server (config tables and .env files): the
    # rest of its environment is whatever the invoking shell happened to have.
    doc["env"] = {key: spec.env[key] for key in sorted(spec.env_keys_from) if key in spec.env}
    return doc


def identity_document(config: ResolvedConfig) -> dict[str, Any]:
    """What makes two resolved configurations the same instance (secrets included: hash it)."""
    return {
        "project": config.project,
        "settings": attrs.asdict(config.settings),
        "files": sorted(os.path.realpath(path) for path in config.files),
        "servers": [_server_identity(spec) for spec in config.servers.values()],
    }


def fingerprint(config: ResolvedConfig) -> str:
    """A stable hex digest of `identity_document(config)`."""
    text = json.dumps(identity_document(config), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------- names


def stem_for(project: str | None) -> str:
    """The file-name stem of a project's sockets: the name itself when it is a safe one.

    A name with characters other than letters, digits, `.`, `_` and `-`, or longer than
    `MAX_STEM`, is cleaned and shortened, with a hash of the original so that distinct
    projects keep distinct stems.
    """
    if project is None:
        return HOME_STEM
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", project).lstrip(".-") or "_"
    if clean == project and len(clean) <= MAX_STEM:
        return clean
    return f"{clean[: MAX_STEM - 9]}~{_short_hash(project)}"


@attrs.frozen
class Slot:
    """One instance's place in the socket directory.

    Attributes:
        directory: The private folder that holds the sockets.
        name: The file-name stem: `assern`, `work`, `work-3f9a0c1b2d4e`.
    """

    directory: Path
    name: str

    @property
    def mcp(self) -> Path:
        """The MCP socket (newline-delimited JSON-RPC, as on stdio)."""
        return self.directory / f"{self.name}{MCP_SUFFIX}"

    @property
    def control(self) -> Path:
        """The control socket (newline-delimited JSON commands for `assernctl`)."""
        return self.directory / f"{self.name}{CONTROL_SUFFIX}"


def home_slot(directory: Path, project: str | None) -> Slot:
    return Slot(directory, stem_for(project))


def own_slot(directory: Path, project: str | None, digest: str) -> Slot:
    """The slot only this configuration can have (home slot name plus a hash)."""
    return Slot(directory, f"{stem_for(project)}-{digest[:HASH_CHARS]}")


def lock_path(directory: Path, project: str | None) -> Path:
    """The lock every start of this project takes while it elects a primary."""
    return directory / f"{stem_for(project)}{LOCK_SUFFIX}"


def slot_names(file_names: list[str]) -> list[str]:
    """The slot names among a directory's file names (each `.ctl` or `.sock`), sorted."""
    names = {
        name.removesuffix(suffix)
        for name in file_names
        for suffix in (CONTROL_SUFFIX, MCP_SUFFIX)
        if name.endswith(suffix)
    }
    return sorted(names)


def candidate_slots(directory: Path, project: str | None, digest: str, existing: list[str]) -> list[Slot]:
    """Where an instance of this configuration may already listen, most likely first.

    The home slot, then this configuration's own slot, then every other slot of the same
    stem (an instance whose configuration was reloaded keeps its old slot name).
    """
    stem = stem_for(project)
    first = [home_slot(directory, project), own_slot(directory, project, digest)]
    seen = {slot.name for slot in first}
    others = [
        Slot(directory, name)
        for name in slot_names(existing)
        if name.startswith(f"{stem}-") and name not in seen
    ]
    return first + others


# ---------------------------------------------------------------- directory


def sun_path_max(platform: str = sys.platform) -> int:
    """Bytes in `sockaddr_un.sun_path`, the terminating NUL included."""
    return 108 if platform.startswith("linux") else 104


def fits(path: Path, platform: str = sys.platform) -> bool:
    """Whether a Unix socket can be bound at `path` on `platform`."""
    return len(os.fsencode(str(path))) < sun_path_max(platform)


def fallback_directories(assern_home: Path, environ: Mapping[str, str], uid: int) -> list[Path]:
    """Short private folders for the sockets of `assern_home`, preferred first."""
    tag = _short_hash(str(assern_home), 10)
    found = []
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        found.append(Path(runtime) / f"assern-{tag}")
    found.append(Path("/tmp") / f"assern-{uid}" / tag)
    return found


@attrs.frozen
class SocketDirectory:
    """Where the sockets of one `$ASSERN_HOME` live.

    Attributes:
        path: The folder.
        fallback: True when `$ASSERN_HOME/run` was too long for socket paths.
    """

    path: Path
    fallback: bool = False


def socket_directory(
    assern_home: Path, environ: Mapping[str, str], *, uid: int | None = None, platform: str = sys.platform
) -> SocketDirectory:
    """`$ASSERN_HOME/run`, or a short fallback when socket paths there would be too long.

    Raises:
        InstanceError: no candidate folder is short enough.
    """
    run = assern_home / "run"
    if fits(run / LONGEST_NAME, platform):
        return SocketDirectory(run)
    uid = os.getuid() if uid is None else uid
    for candidate in fallback_directories(assern_home, environ, uid):
        if fits(candidate / LONGEST_NAME, platform):
            return SocketDirectory(candidate, fallback=True)
    raise InstanceError(
        f"socket paths under {run} exceed the platform limit of {sun_path_max(platform) - 1} bytes "
        "and no short runtime folder is available; set ASSERN_HOME to a shorter path"
    )


def ensure_private_dir(path: Path, *, uid: int | None = None) -> None:
    """Create `path` (mode 0700) or check an existing one: a real folder, ours, 0700.

    A folder of ours with looser permissions is tightened; one that is a symlink or
    belongs to someone else is refused.

    Raises:
        InstanceError: the folder cannot be made private.
    """
    uid = os.getuid() if uid is None else uid
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise InstanceError(f"cannot create the socket folder {path}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise InstanceError(f"{path} is not a plain folder; refusing to put sockets there")
    if info.st_uid != uid:
        raise InstanceError(f"{path} belongs to uid {info.st_uid}, not to you (uid {uid}); refusing it")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def prepare_socket_directory(directory: SocketDirectory) -> None:
    """Make the socket folder (and, for the /tmp fallback, its per-user parent) private."""
    if directory.fallback and directory.path.parent.name.startswith("assern-"):
        ensure_private_dir(directory.path.parent)
    elif not directory.path.parent.exists():
        directory.path.parent.mkdir(parents=True, mode=0o700)
    ensure_private_dir(directory.path)


# -------------------------------------------------------------------- probe


class Liveness(enum.Enum):
    LIVE = "live"  #: something accepts connections at the path
    STALE = "stale"  #: a socket file with nobody listening (its owner died)
    ABSENT = "absent"  #: no file at all


def probe(path: Path, timeout: float = 1.0) -> Liveness:
    """Whether anybody listens at `path` (a connect attempt, closed at once).

    A refused connection (or a file that is not a socket) is stale; a connection that
    times out (a full backlog) or is not ours to try counts as live: never remove what
    might still be in use.
    """
    if not os.path.lexists(path):
        return Liveness.ABSENT
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except FileNotFoundError:
        return Liveness.ABSENT
    except (ConnectionRefusedError, NotADirectoryError):
        return Liveness.STALE
    except OSError as exc:
        return Liveness.STALE if exc.errno in (errno.ENOTSOCK, errno.ECONNREFUSED) else Liveness.LIVE
    finally:
        sock.close()
    return Liveness.LIVE
