"""Trust for a folder's own configuration: what it would start, its digest, the store.

A project folder can hold configuration of its own: `.assern/config.toml` (with its
includes), `.assern/.env`, or an `mcpServers` file found in the working folder
(`mcp-config.json`). Anyone who can put a file into a repository writes those, so
none of it applies until the user trusts the folder (docs/security.md). What is
trusted is the folder's real path *and* a digest of the effective content of its files:
what runs (each server's fields as parsed: command, args, env values, cwd, root, url,
headers, ...), the `.env` values, and the settings, profiles, groups and project name.
Comments, order and whitespace are not in the digest; the real path of every file read
is, so a symlinked `.assern/` that points elsewhere is a change.

The store is `$ASSERN_HOME/trust.json`, 0600, written atomically under an flock on
`trust.lock` beside it. A store that is corrupt, writable by others or owned by another
user is not used at all: nothing of any folder runs, and the report says why.

Everything here but `read_store` and `update_store` is pure.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs

#: The trust store in `$ASSERN_HOME`.
TRUST_FILE = "trust.json"
#: The lock file beside it (the store itself is replaced on every write).
TRUST_LOCK = "trust.lock"
STORE_FORMAT = 1

#: Why a folder's files do not apply: never trusted (or moved), changed since, or no
#: usable store to say.
Reason = Literal["new", "changed", "store"]


def digest_of(value: Any) -> str:
    """The sha256 of `value` as canonical JSON (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ------------------------------------------------------------------ what a folder says


@attrs.frozen(kw_only=True)
class Table:
    """One server table a folder's file wrote: its parsed fields, and that file's real path."""

    fields: Mapping[str, Any]
    file: str


@attrs.frozen(kw_only=True)
class ServerSketch:
    """What one server would start, as shown before trusting it: never an env value."""

    command: str | None = None
    args: tuple[str, ...] = ()
    env_keys: tuple[str, ...] = ()
    cwd: str | None = None
    root: str | None = None
    url: str | None = None
    header_keys: tuple[str, ...] = ()
    builtin: str | None = None
    disabled: bool = False

    @classmethod
    def of(cls, tables: Sequence[Table]) -> ServerSketch:
        """The fields the tables give, a later table winning where it sets one."""
        found: dict[str, Any] = {}
        env: dict[str, None] = {}
        headers: dict[str, None] = {}
        for table in tables:
            fields = table.fields
            for key in ("command", "args", "cwd", "root", "url", "builtin", "disabled"):
                if fields.get(key) is not None:
                    found[key] = fields[key]
            env.update(dict.fromkeys(fields.get("env") or {}))
            headers.update(dict.fromkeys(fields.get("headers") or {}))
        return cls(
            command=found.get("command"),
            args=tuple(found.get("args") or ()),
            env_keys=tuple(sorted(env)),
            cwd=found.get("cwd"),
            root=found.get("root"),
            url=found.get("url"),
            header_keys=tuple(sorted(headers)),
            builtin=found.get("builtin"),
            disabled=bool(found.get("disabled")),
        )

    @classmethod
    def from_json(cls, value: Any) -> ServerSketch:
        """Read back `to_json`; raises ValueError for anything else."""
        if not isinstance(value, dict):
            raise ValueError("a server is not a JSON object")
        try:
            return cls(
                command=_opt_str(value.get("command")),
                args=_strings(value.get("args", [])),
                env_keys=_strings(value.get("env_keys", [])),
                cwd=_opt_str(value.get("cwd")),
                root=_opt_str(value.get("root")),
                url=_opt_str(value.get("url")),
                header_keys=_strings(value.get("header_keys", [])),
                builtin=_opt_str(value.get("builtin")),
                disabled=value.get("disabled") is True,
            )
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    def to_json(self) -> dict[str, Any]:
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in attrs.asdict(self, recurse=False).items()
        }

    def describe(self) -> str:
        """One line: what runs, the env keys (never values), cwd and root."""
        if self.builtin is not None:
            facts = [f"builtin {self.builtin}"]
        elif self.url is not None:
            facts = [f"url {self.url}"]
        elif self.command is not None:
            facts = [shlex.join([self.command, *self.args])]
        else:
            facts = ["(changes a server of the global config)"]
        if self.env_keys:
            facts.append("env " + ", ".join(self.env_keys))
        if self.header_keys:
            facts.append("headers " + ", ".join(self.header_keys))
        if self.cwd is not None:
            facts.append(f"cwd {self.cwd}")
        if self.root is not None:
            facts.append(f"root {self.root}")
        if self.disabled:
            facts.append("disabled")
        return "; ".join(facts)


def _opt_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {value!r}")


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"expected a list of strings, got {value!r}")
    return tuple(value)


@attrs.frozen(kw_only=True)
class ProjectFiles:
    """A folder's own configuration, parsed and not used: what trust is asked for.

    Attributes:
        folder: The folder's real path (the project root, or the working folder of a
            discovered `mcpServers` file): the key in the store.
        files: The files as found (for watching and for the user), in reading order.
        real_files: Their real paths (in the digest: a symlink's new target is a change).
        servers: What each server the files name would start.
        env_keys: The keys of `.assern/.env` (every server's process gets them).
        sections: The other things the files set: "project", "settings", "profiles", "groups".
        parts: A digest per part ("server NAME", ".env", "settings"), to say what changed.
        digest: The digest of all of it and the folder.
    """

    folder: str
    files: tuple[Path, ...]
    real_files: tuple[str, ...]
    servers: Mapping[str, ServerSketch]
    env_keys: tuple[str, ...]
    sections: tuple[str, ...]
    parts: Mapping[str, str]
    digest: str

    def describe(self) -> list[str]:
        """The lines `assernctl trust` shows before asking."""
        lines = [f"  files: {', '.join(self.file_names())}"]
        lines += [f"  server {name}: {sketch.describe()}" for name, sketch in self.servers.items()]
        if self.env_keys:
            lines.append(f"  .env (given to every server): {', '.join(self.env_keys)}")
        if self.sections:
            lines.append(f"  also sets: {', '.join(self.sections)}")
        return lines

    def file_names(self) -> list[str]:
        """The files' real paths, relative to the folder where they are inside it."""
        names = []
        for file in self.real_files:
            try:
                names.append(str(Path(file).relative_to(self.folder)))
            except ValueError:
                names.append(file)  # outside the folder: a symlinked `.assern/`, an include
        return names


def project_files(
    folder: str,
    *,
    files: Sequence[Path],
    servers: Mapping[str, Sequence[Table]],
    dotenv: Mapping[str, str] | None = None,
    dotenv_file: str | None = None,
    other: Mapping[str, Any] | None = None,
) -> ProjectFiles:
    """Sketch and digest what a folder's files say.

    Args:
        folder: The folder's real path.
        files: Every file read, as found.
        servers: Each server's tables, in the order they apply.
        dotenv: The `.assern/.env` values, if there is one.
        dotenv_file: Its real path.
        other: The other tables the files set, as parsed ("project", "settings", ...);
            empty and None values are left out.
    """
    parts = {
        f"server {name}": digest_of([[table.file, dict(table.fields)] for table in tables])
        for name, tables in servers.items()
    }
    if dotenv is not None:
        parts[".env"] = digest_of([dotenv_file, dict(dotenv)])
    sections = {key: value for key, value in (other or {}).items() if value not in (None, {}, (), [])}
    if sections:
        parts["settings"] = digest_of(sections)
    real_files = tuple(os.path.realpath(file) for file in files)
    return ProjectFiles(
        folder=folder,
        files=tuple(files),
        real_files=real_files,
        servers={name: ServerSketch.of(tables) for name, tables in servers.items()},
        env_keys=tuple(sorted(dotenv or {})),
        sections=tuple(sections),
        parts=parts,
        digest=digest_of({"folder": folder, "files": real_files, "parts": parts}),
    )


# ------------------------------------------------------------------ the store


@attrs.frozen(kw_only=True)
class TrustRecord:
    """One trusted folder: the digest granted, when, and what it showed (for differences)."""

    folder: str
    digest: str
    trusted_at: str
    parts: Mapping[str, str] = attrs.field(factory=dict)
    servers: Mapping[str, ServerSketch] = attrs.field(factory=dict)
    env_keys: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    @classmethod
    def granting(cls, project: ProjectFiles, *, now: str) -> TrustRecord:
        return cls(
            folder=project.folder,
            digest=project.digest,
            trusted_at=now,
            parts=dict(project.parts),
            servers=dict(project.servers),
            env_keys=project.env_keys,
            files=project.real_files,
        )

    @classmethod
    def from_json(cls, folder: str, value: Any) -> TrustRecord:
        """Read one record of the store; raises ValueError naming what is wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"the record of {folder} is not a JSON object")
        digest, trusted_at = value.get("digest"), value.get("trusted_at", "")
        if not isinstance(digest, str) or not isinstance(trusted_at, str):
            raise ValueError(f"the record of {folder} has no digest")
        parts, servers = value.get("parts", {}), value.get("servers", {})
        if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
            raise ValueError(f"the record of {folder} has parts that are not digests")
        if not isinstance(servers, dict):
            raise ValueError(f"the record of {folder} has servers that are not a JSON object")
        try:
            return cls(
                folder=folder,
                digest=digest,
                trusted_at=trusted_at,
                parts=dict(parts),
                servers={name: ServerSketch.from_json(sketch) for name, sketch in servers.items()},
                env_keys=_strings(value.get("env_keys", [])),
                files=_strings(value.get("files", [])),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the record of {folder}: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "trusted_at": self.trusted_at,
            "parts": dict(self.parts),
            "servers": {name: sketch.to_json() for name, sketch in self.servers.items()},
            "env_keys": list(self.env_keys),
            "files": list(self.files),
        }


@attrs.frozen(kw_only=True)
class TrustStore:
    """What the store file says: its records by folder, or why it cannot be used."""

    path: Path
    records: Mapping[str, TrustRecord] = attrs.field(factory=dict)
    problem: str | None = None


def parse_store(path: Path, text: str) -> TrustStore:
    """The records of a store file's text; a text that is not one gives a `problem`."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        return TrustStore(path=path, problem=f"it is not valid JSON ({exc})")
    if not isinstance(document, dict) or document.get("format") != STORE_FORMAT:
        return TrustStore(path=path, problem=f"it is not a trust store of format {STORE_FORMAT}")
    folders = document.get("folders")
    if not isinstance(folders, dict):
        return TrustStore(path=path, problem="its 'folders' is not a JSON object")
    try:
        records = {folder: TrustRecord.from_json(folder, value) for folder, value in folders.items()}
    except ValueError as exc:
        return TrustStore(path=path, problem=str(exc))
    return TrustStore(path=path, records=records)


def store_text(records: Mapping[str, TrustRecord]) -> str:
    document = {
        "format": STORE_FORMAT,
        "folders": {folder: records[folder].to_json() for folder in sorted(records)},
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _unsafe(info: os.stat_result) -> str | None:
    """Why a store with this stat may not be believed, or None."""
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if info.st_uid != os.getuid():
        return f"it is owned by another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"others may write it (mode {stat.S_IMODE(info.st_mode):04o}; it must be 0600)"
    return None


def read_store(path: Path) -> TrustStore:
    """Read and check the store: absent is empty; unsafe or corrupt gives a `problem`.

    The file is opened without following a symbolic link and checked on the descriptor
    that is read, so it cannot be swapped between the check and the read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return TrustStore(path=path)
    except OSError as exc:
        if os.path.islink(path):
            return TrustStore(path=path, problem="it is a symbolic link")
        return TrustStore(path=path, problem=f"it cannot be read ({exc.strerror or exc})")
    with os.fdopen(fd, "rb") as file:
        problem = _unsafe(os.fstat(file.fileno()))
        if problem is not None:
            return TrustStore(path=path, problem=problem)
        try:
            text = file.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return TrustStore(path=path, problem=f"it cannot be read ({exc})")
    return parse_store(path, text)


class TrustStoreError(Exception):
    """The store cannot be changed: it is unsafe or corrupt, or cannot be written."""


@contextlib.contextmanager
def store_lock(path: Path) -> Iterator[None]:
    """Hold the flock on the store's lock file (two terminals granting at once wait in turn)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = path.with_name(TRUST_LOCK)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise TrustStoreError(f"{lock}: cannot open the lock file ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def update_store(
    path: Path, change: Callable[[dict[str, TrustRecord]], dict[str, TrustRecord]]
) -> dict[str, TrustRecord]:
    """Apply `change` to the records under the lock and write the store atomically (0600).

    Returns:
        The records written.

    Raises:
        TrustStoreError: the store is unsafe or corrupt (it is left as it is, so no
            record is lost), or cannot be written.
    """
    with store_lock(path):
        store = read_store(path)
        if store.problem is not None:
            raise TrustStoreError(
                f"{path}: {store.problem}; it is left as it is. Look at it, then remove it "
                "(every folder then needs `assernctl trust` again) or repair it"
            )
        records = change(dict(store.records))
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # left by a writer that died: we hold the lock
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(store_text(records))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise TrustStoreError(f"{path}: cannot write the trust store ({exc.strerror or exc})") from None
    return records


def grant(path: Path, projects: Sequence[ProjectFiles], *, now: str) -> dict[str, TrustRecord]:
    """Record each folder's files as trusted (replacing what it had); see `update_store`."""

    def change(records: dict[str, TrustRecord]) -> dict[str, TrustRecord]:
        records.update({project.folder: TrustRecord.granting(project, now=now) for project in projects})
        return records

    return update_store(path, change)


def revoke(path: Path, folders: Sequence[str]) -> list[str]:
    """Forget the folders' records; returns the folders that had one (see `update_store`)."""
    removed: list[str] = []

    def change(records: dict[str, TrustRecord]) -> dict[str, TrustRecord]:
        removed.extend(folder for folder in dict.fromkeys(folders) if records.pop(folder, None) is not None)
        return records

    update_store(path, change)
    return removed


# ------------------------------------------------------------------ the decision


@attrs.frozen(kw_only=True)
class Untrusted:
    """A folder whose files do not apply, and why.

    Attributes:
        project: What its files say.
        reason: "new" (never trusted, or trusted at another path), "changed" (its
            content differs from what was trusted), "store" (the store is unusable).
        changes: For "changed": what differs from what was trusted, one line each.
    """

    project: ProjectFiles
    reason: Reason
    changes: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        """What the user runs to review and allow it."""
        return f"assernctl trust {shlex.quote(self.project.folder)}"

    def line(self) -> str:
        """The one line for stderr, status and the log: folder, what waits, the command."""
        count = len(self.project.servers)
        waits = f"{count} server(s)" if count else "its settings"
        files = ", ".join(self.project.file_names())
        why = {
            "new": "this folder's configuration is not trusted",
            "changed": "it changed since it was trusted",
            "store": "the trust store cannot be used",
        }[self.reason]
        return (
            f"{self.project.folder}: {waits} from {files} not started: {why}; "
            f"review and allow with `{self.command}`"
        )


@attrs.frozen(kw_only=True)
class TrustReport:
    """What trust decided for one resolution.

    Attributes:
        store: The store file, when any folder's files were found (else None).
        store_problem: Why the store was not used (then every folder is untrusted).
        trusted: The folders whose files apply.
        untrusted: The folders whose files do not, with why.
        watched: Files whose change may change the decision: the store and the
            untrusted folders' files.
    """

    store: Path | None = None
    store_problem: str | None = None
    trusted: tuple[str, ...] = ()
    untrusted: tuple[Untrusted, ...] = ()
    watched: tuple[Path, ...] = ()

    def lines(self) -> list[str]:
        """Every line to tell the user (the store's problem first)."""
        lines = []
        if self.store_problem is not None:
            lines.append(
                f"the trust store {self.store} is ignored: {self.store_problem}; "
                "no project folder's configuration runs until it is repaired or removed"
            )
        return lines + [untrusted.line() for untrusted in self.untrusted]

    def document(self) -> dict[str, Any]:
        """The JSON form (`assernctl status --json`, `assernctl config show --json`)."""
        return {
            "store_problem": self.store_problem,
            "trusted": list(self.trusted),
            "untrusted": [
                {
                    "folder": item.project.folder,
                    "servers": list(item.project.servers),
                    "reason": item.reason,
                    "command": item.command,
                    "changes": list(item.changes),
                }
                for item in self.untrusted
            ],
            "lines": self.lines(),
        }


class HasTrust(Protocol):
    @property
    def trust(self) -> TrustReport: ...


def untrusted_projects(config: HasTrust) -> tuple[Untrusted, ...]:
    """The folders a resolved configuration left out for want of trust (for checks such
    as `assernctl doctor`: each has `line()` and `command`)."""
    return config.trust.untrusted


def assess(projects: Sequence[ProjectFiles], store: TrustStore) -> TrustReport:
    """Decide, for each folder's files, whether they apply.

    A folder is trusted when the store (usable) holds a record for its real path with
    the same digest. Anything else is untrusted: a folder never trusted, or trusted at
    another path (moved or renamed); content that changed (never the new content, and
    the old content is not kept to run either); a store that cannot be used.
    """
    trusted: list[str] = []
    untrusted: list[Untrusted] = []
    for project in projects:
        record = store.records.get(project.folder)
        if store.problem is not None:
            untrusted.append(Untrusted(project=project, reason="store"))
        elif record is None:
            untrusted.append(Untrusted(project=project, reason="new"))
        elif record.digest != project.digest:
            differences = tuple(changes(record, project))
            untrusted.append(Untrusted(project=project, reason="changed", changes=differences))
        else:
            trusted.append(project.folder)
    watched = [store.path] if projects else []
    watched += [file for item in untrusted for file in item.project.files]
    return TrustReport(
        store=store.path if projects else None,
        store_problem=store.problem if projects else None,
        trusted=tuple(trusted),
        untrusted=tuple(untrusted),
        watched=tuple(dict.fromkeys(watched)),
    )


def changes(record: TrustRecord, project: ProjectFiles) -> list[str]:
    """What differs between the trusted record and the folder's files now, one line each.

    Env and header values are never shown: a changed value is said to have changed.
    """
    lines = []
    before, after = record.servers, project.servers
    for name, sketch in after.items():
        if name not in before:
            lines.append(f"+ server {name}: {sketch.describe()}")
        elif record.parts.get(f"server {name}") != project.parts.get(f"server {name}"):
            lines.append(f"~ server {name}: {_server_change(before[name], sketch)}")
    lines += [f"- server {name}" for name in before if name not in after]
    if record.parts.get(".env") != project.parts.get(".env"):
        added = sorted(set(project.env_keys) - set(record.env_keys))
        removed = sorted(set(record.env_keys) - set(project.env_keys))
        facts = [f"+{key}" for key in added] + [f"-{key}" for key in removed]
        lines.append("~ .env: " + (", ".join(facts) if facts else "values changed"))
    if record.parts.get("settings") != project.parts.get("settings"):
        lines.append("~ settings, profiles, groups or project name changed")
    if tuple(record.files) != project.real_files:
        lines.append(f"~ files now read: {', '.join(project.real_files)} (were: {', '.join(record.files)})")
    return lines or ["~ the content changed"]


def _server_change(before: ServerSketch, after: ServerSketch) -> str:
    facts = []
    for field in ("command", "args", "url", "builtin", "cwd", "root", "disabled"):
        old, new = getattr(before, field), getattr(after, field)
        if old != new:
            facts.append(f"{field} {_shown(old)} -> {_shown(new)}")
    for field, label in (("env_keys", "env"), ("header_keys", "headers")):
        old_keys, new_keys = set(getattr(before, field)), set(getattr(after, field))
        if old_keys != new_keys:
            keys = [f"+{k}" for k in sorted(new_keys - old_keys)]
            keys += [f"-{k}" for k in sorted(old_keys - new_keys)]
            facts.append(f"{label} {', '.join(keys)}")
    return "; ".join(facts) if facts else "env or header values, or other fields, changed"


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return shlex.join(value) if value else "(none)"
    return "(none)" if value is None else str(value)
