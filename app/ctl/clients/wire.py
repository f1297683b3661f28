"""`assernctl clients wire` and `restore`: point a client at assern, and undo it.

Wiring edits the client's files in place (`jsonc` for JSON, `tomledit` for Codex's
TOML): every entry that assern also runs (a `duplicate`) is removed, and one `assern`
entry, the absolute path of this `assern` with `serve`, is added to the client's
user-wide file (or, when it has none, to its project file). An entry that already runs
assern is left as it is, so a second run changes nothing. Each changed file is backed
up first (backup.py) and replaced atomically (files.py); the result is parsed again
and must be exactly the intended document.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.config.env import parse_dotenv
from assern.actors.config.home import GLOBAL_CONFIG
from assern.actors.config.spec import ConfigError
from assern.app.ctl.clients.backup import backup_folder, newest, take_backup
from assern.app.ctl.clients.files import FileRefused, check_writable, replace, snapshot
from assern.app.ctl.clients.formats import dig
from assern.app.ctl.clients.jsonc import JsonError, parse, with_member, without_member
from assern.app.ctl.clients.survey import ClientFinding, local_config
from assern.app.ctl.clients.tomledit import TomlEditError, with_server, without_server
from assern.app.ctl.config.writing import write_new

if TYPE_CHECKING:
    from assern.app.ctl.clients.locations import Location

#: The name of the entry `wire` adds.
ENTRY = "assern"
#: What Codex passes to an MCP server without being told (its default allow-list).
CODEX_PASSES = frozenset(
    ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ")
)
#: Variables assern sets for its own config (never needed from the client).
OWN_VARIABLES = frozenset(("ASSERN_PYTHON",))
#: Names whose variables Gemini CLI keeps from MCP servers.
GEMINI_DROPS = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|CERT", re.IGNORECASE
)
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)|\$([A-Za-z_][A-Za-z0-9_]*)")


class WireRefused(Exception):
    """The client's files are left as they are; the message says why."""


def assern_executable(argv0: str = sys.argv[0]) -> Path:
    """The absolute path of the `assern` beside this `assernctl` (else beside Python,
    else on PATH), as the clients are to start it."""
    import shutil

    for folder in (Path(argv0).absolute().parent, Path(sys.executable).parent):
        candidate = folder / "assern"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("assern")
    if found is None:
        raise WireRefused("the `assern` command is not found beside assernctl nor on PATH")
    return Path(found).absolute()


def referenced_variables(files: list[Path]) -> list[str]:
    """Every `${VAR}`/`$VAR` the server tables of assern's config files refer to."""
    names: dict[str, None] = {}

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            for match in _REFERENCE.finditer(value.replace("$$", "")):
                yield match.group(1) or match.group(2)
        elif isinstance(value, Mapping):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    for path in files:
        if path.suffix != ".toml":
            continue
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for name in walk({"servers": document.get("servers"), "projects": document.get("projects")}):
            names.setdefault(name)
    return [name for name in names if name not in OWN_VARIABLES]


def defined_in_dotenv(paths: list[Path]) -> set[str]:
    defined: set[str] = set()
    for path in paths:
        try:
            defined |= set(parse_dotenv(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ConfigError):  # a broken .env is `config validate`'s to report
            continue
    return defined


@attrs.frozen(kw_only=True)
class Context:
    """What the entry depends on: the executable, ASSERN_HOME, the variables in play."""

    executable: Path
    assern_home: Path
    assern_home_set: bool
    variables: tuple[str, ...] = ()
    defined: frozenset[str] = frozenset()


def entry_for(client: str, context: Context) -> dict[str, Any]:
    """The `assern` entry as `client` writes one."""
    entry: dict[str, Any] = {"command": str(context.executable), "args": ["serve"]}
    if client in ("claude-code", "vscode"):
        entry = {"type": "stdio", **entry}
    env: dict[str, str] = {}
    if context.assern_home_set or client == "codex":
        env["ASSERN_HOME"] = str(context.assern_home)
    if env:
        entry["env"] = env
    if client == "codex":
        forwarded = [v for v in context.variables if v not in CODEX_PASSES and v not in context.defined]
        if forwarded:
            entry["env_vars"] = forwarded
    return entry


def advice(client: str, context: Context) -> list[str]:
    """What the user must know about this client once it reaches assern."""
    if client == "codex":
        return [
            "Codex passes MCP servers only HOME, PATH and a few more variables: the entry sets "
            "ASSERN_HOME (`env`) and forwards the variables assern's config refers to (`env_vars`)",
            "`codex exec` treats a server that is still starting as absent: add `required = true` to "
            "[mcp_servers.assern] if your runs need its tools",
        ]
    if client == "gemini":
        hidden = [v for v in context.variables if GEMINI_DROPS.search(v) and v not in context.defined]
        found = [
            "Gemini CLI starts MCP servers only in trusted folders: "
            "run `gemini trust` (or /permissions) in each project"
        ]
        if hidden:
            found.append(
                "Gemini CLI keeps secret-like variables from MCP servers; put these in "
                f"{context.assern_home / '.env'}: {', '.join(hidden)}"
            )
        return found
    if client == "claude-code":
        return [
            "the entry is in Claude Code's user scope (every project); a project's .mcp.json or local "
            "entry named 'assern' would win over it"
        ]
    return []


@attrs.frozen(kw_only=True)
class FileEdit:
    """The changes to one file."""

    path: Path
    syntax: str
    removed: list[tuple[tuple[str, ...], str]] = attrs.field(factory=list)
    added: tuple[tuple[str, ...], dict[str, Any]] | None = None


def plan_wire(finding: ClientFinding, context: Context) -> tuple[list[FileEdit], list[str]]:
    """The edits that point `finding`'s client at assern, and the entries it keeps.

    Returns:
        (the edits by file, "NAME (FILE)" for entries assern does not run, which stay).

    Raises:
        WireRefused: a file of the client does not read, or the client has no file.
    """
    broken = [f for f in finding.files if f.error is not None]
    if broken:
        raise WireRefused(
            "\n".join(f"{f.location.path}: {f.error}; left untouched" for f in broken)
            + "\nnothing was changed: fix the file first"
        )
    edits: dict[Path, FileEdit] = {}

    def edit(location: Location) -> FileEdit:
        return edits.setdefault(location.path, FileEdit(path=location.path, syntax=location.syntax))

    kept = []
    for server in finding.servers:
        location = server.server.location
        if server.reach == "duplicate":
            edit(location).removed.append((location.key, server.server.name))
        elif server.reach == "bypass":
            kept.append(f"{server.server.name} ({location.path})")
    if not finding.wired:
        existing = [f.location for f in finding.files if f.exists]
        primary = next((loc for loc in existing if loc.scope == "user"), None) or next(iter(existing), None)
        if primary is None:
            raise WireRefused(f"no config file of {finding.client} was found: nothing to wire")
        target = edit(primary)
        taken = any(s.server.name == ENTRY and s.server.location == primary for s in finding.servers)
        if taken and (primary.key, ENTRY) not in target.removed:
            raise WireRefused(f"{primary.path}: a server named {ENTRY!r} that is not assern is in the way")
        target = attrs.evolve(target, added=(primary.key, entry_for(finding.client, context)))
        edits[primary.path] = target
    return [e for e in edits.values() if e.removed or e.added], kept


def _expected(data: Any, edit: FileEdit) -> Any:
    result = copy.deepcopy(data)
    for key, name in edit.removed:
        table = dig(result, key)
        if isinstance(table, dict):
            table.pop(name, None)
    if edit.added is not None:
        key, value = edit.added
        node = result
        for part in key:
            node = node.setdefault(part, {})
        node[ENTRY] = value
    return result


def edited_text(text: str, edit: FileEdit) -> str:
    """The file's new text (see the module's docstring).

    Raises:
        WireRefused: the edit cannot be made exactly (the file is left as it is).
    """
    try:
        if edit.syntax == "toml":
            for _key, name in edit.removed:
                text = without_server(text, name)
            if edit.added is not None:
                text = with_server(text, ENTRY, edit.added[1])
            return text
        comments = edit.syntax == "jsonc"
        before = parse(text, comments=comments).data
        for key, name in edit.removed:
            text = without_member(text, key, name, comments=comments)
        if edit.added is not None:
            key, value = edit.added
            missing = next(
                (i for i in range(len(key)) if not isinstance(dig(before, key[: i + 1]), dict)), None
            )
            if missing is None:
                text = with_member(text, key, ENTRY, value, comments=comments)
            else:
                nested: Any = {ENTRY: value}
                for part in reversed(key[missing + 1 :]):
                    nested = {part: nested}
                text = with_member(text, key[:missing], key[missing], nested, comments=comments)
        after = parse(text, comments=comments).data if comments else json.loads(text)
    except (TomlEditError, JsonError, KeyError, ValueError) as exc:
        raise WireRefused(f"{edit.path}: cannot edit it safely ({exc}); left untouched") from None
    if after != _expected(before, edit):
        raise WireRefused(f"{edit.path}: the edit would change more than intended; left untouched")
    return text


@attrs.frozen(kw_only=True)
class Written:
    path: Path
    backup: Path
    removed: tuple[str, ...]
    added: bool


def apply_wire(client: str, edits: list[FileEdit], assern_home: Path) -> list[Written]:
    """Back up and rewrite each file; one refused file stops the rest.

    Raises:
        WireRefused: a file is read-only, changed while being read, or cannot be backed up.
    """
    written = []
    for edit in edits:
        try:
            snap = snapshot(edit.path)
            check_writable(snap)
            new = edited_text(snap.data.decode("utf-8"), edit)
            backup, _ = take_backup(backup_folder(assern_home, client), snap)
            replace(snap, new.encode("utf-8"))
        except FileRefused as exc:
            raise WireRefused(f"{exc}; nothing more was changed") from None
        except UnicodeDecodeError:
            raise WireRefused(f"{edit.path}: not UTF-8 text; left untouched") from None
        written.append(
            Written(
                path=edit.path,
                backup=backup,
                removed=tuple(name for _, name in edit.removed),
                added=edit.added is not None,
            )
        )
    return written


@attrs.frozen(kw_only=True)
class Restored:
    path: Path
    backup: Path
    changed: bool


def restore(client: str, paths: list[Path], assern_home: Path) -> list[Restored]:
    """Put the newest backup of each of `paths` back, byte for byte.

    Raises:
        WireRefused: no backup of any of them, or a file cannot be written.
    """
    folder = backup_folder(assern_home, client)
    done = []
    for path in dict.fromkeys(paths):
        backup = newest(folder, path)
        if backup is None:
            continue
        data = backup.read_bytes()
        try:
            snap = snapshot(path)
        except FileRefused:
            if path.exists() or path.is_symlink():
                raise
            if not write_new(path, data.decode("utf-8")):
                raise WireRefused(f"{path}: it appeared while restoring; left as it is") from None
            done.append(Restored(path=path, backup=backup, changed=True))
            continue
        if snap.data == data:
            done.append(Restored(path=path, backup=backup, changed=False))
            continue
        try:
            replace(snap, data)
        except FileRefused as exc:
            raise WireRefused(str(exc)) from None
        done.append(Restored(path=path, backup=backup, changed=True))
    if not done:
        raise WireRefused(f"no backup of {client}'s files in {folder}: nothing to restore")
    return done


def assern_files(assern_home: Path, root: Path | None) -> list[Path]:
    files = [assern_home / GLOBAL_CONFIG]
    if root is not None:
        files.append(local_config(root))
    return files
