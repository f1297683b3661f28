"""`assernctl clients import`: the clients' servers added to assern's configuration.

A user-wide server goes to the global file (`$ASSERN_HOME/config.toml`), a project's to
that project's `.assern/config.toml`. A server assern already runs (the same command
and args, or the same URL, under any name) is not added twice. A name that assern or
an earlier client of the same import already gives to another server is a clash: the
server is added as `NAME-CLIENT` and the clash is reported, never merged. A literal
secret (an `env` value with a secret-like name or value, any literal header value)
goes to the `.env` file beside the config, and the table refers to it as `${VAR}`.

Planning reads everything and writes nothing; the new files are checked with the
config loader's own models before `apply` writes the `.env` file, then the config.
"""

from __future__ import annotations

import re
from collections import ChainMap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.config.env import parse_dotenv
from assern.actors.config.home import user_home
from assern.actors.config.layers import read_dotenv, read_global, read_local, read_text
from assern.actors.config.model import ConfigFile, LocalConfigFile, server_problems
from assern.actors.config.spec import ConfigError
from assern.actors.config.structure import parse_toml, structure
from assern.actors.config.variables import undefined_references
from assern.app.ctl.clients.files import FileRefused, replace, snapshot
from assern.app.ctl.clients.formats import ClientServer
from assern.app.ctl.clients.survey import ClientFinding, Survey, launches_of, local_config
from assern.app.ctl.clients.tomledit import TomlEditError, with_server
from assern.app.ctl.clients.translate import launch, translate
from assern.app.ctl.config.writing import write_new

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Names of variables that hold secrets (as Gemini CLI and others judge them).
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|COOKIE|SESSION|CERT", re.IGNORECASE
)
#: Values that look like a credential: long, one word, letters and digits mixed.
_TOKEN_LIKE = re.compile(r"(?=[^\s]*[A-Za-z])(?=[^\s]*\d)[A-Za-z0-9_\-.+/=~]{20,}")
_BARE_VALUE = re.compile(r"[A-Za-z0-9_./:@+,=-]*")
NEW_CONFIG_HEADER = (
    "# assern's configuration (servers added by `assernctl clients import`).\n"
    "# Check it with `assernctl config validate`; see docs/configuration.md.\n"
)


class ImportRefused(Exception):
    """The import cannot go ahead; nothing was written. The message says why."""


def is_secret(key: str, value: str, *, header: bool) -> bool:
    """Whether a literal value is to leave the config file for the .env file.

    Every literal header value does (headers carry credentials); an env value does when
    its name is secret-like (TOKEN, KEY, SECRET...) or it looks like a token itself.
    """
    if header:
        return bool(value)
    if value.startswith(("/", "~", "./", "http://", "https://")):
        return bool(_SECRET_NAME.search(key))
    return bool(_SECRET_NAME.search(key) or _TOKEN_LIKE.fullmatch(value))


def _variable(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper() or "SECRET"
    return f"_{name}" if name[0].isdigit() else name


@attrs.frozen(kw_only=True)
class Added:
    """A server to add.

    Attributes:
        source: The client's entry.
        name: Its name in assern (`NAME-CLIENT` after a clash).
        table: Its `[servers.NAME]` table, secrets as references.
        moved: The variables its secrets went to, in the .env file.
        notes: What the translation noted (key names only).
    """

    source: ClientServer
    name: str
    table: dict[str, Any] = attrs.field(repr=False)
    moved: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Skipped:
    source: ClientServer
    reason: str


@attrs.frozen(kw_only=True)
class Target:
    """One config file the import adds to, and the .env file beside it.

    Attributes:
        config: The config file (it may not exist yet).
        dotenv: The .env file beside it.
        root: The project's folder for a project's file; None for the global one.
        text: The config file's text now, or None when it does not exist.
        dotenv_text: The .env file's text now, or None.
        launches: The servers assern runs there already, by name.
        included: Servers the global file includes from JSON files (for validation).
    """

    config: Path
    dotenv: Path
    root: Path | None
    text: str | None
    dotenv_text: str | None
    launches: dict[str, tuple[str, ...]]
    included: frozenset[str] = frozenset()
    global_dotenv: Path | None = None
    added: list[Added] = attrs.field(factory=list)
    secrets: dict[str, str] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class ImportPlan:
    targets: tuple[Target, ...]
    skipped: tuple[Skipped, ...]
    clashes: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def _target(
    config: Path, root: Path | None, assern_home: Path, home: Path, base: Mapping[str, tuple[str, ...]]
) -> Target:
    dotenv = config.parent / ".env"
    try:
        text = read_text(config)
        dotenv_text = read_text(dotenv)
        if dotenv_text is not None:
            parse_dotenv(dotenv_text, file=str(dotenv))
        if root is None:
            source = read_global(config, required=False, home=home)
            launches = launches_of(source.servers)
            included = frozenset(
                n for n, ls in source.servers.items() if any(layer.origin.layer == "mcp-json" for layer in ls)
            )
        else:
            launches = {**base, **launches_of(read_local(root, home=home).servers)}
            included = frozenset()
    except ConfigError as exc:
        raise ImportRefused(f"assern's configuration does not read; fix it first:\n{exc}") from None
    return Target(
        config=config,
        dotenv=dotenv,
        root=root,
        text=text,
        dotenv_text=dotenv_text,
        launches=dict(launches),
        included=included,
        global_dotenv=None if root is None else assern_home / ".env",
    )


def _move_secrets(
    name: str,
    table: dict[str, Any],
    literals: Sequence[tuple[str, str]],
    target: Target,
    environ: Mapping[str, str],
) -> tuple[dict[str, Any], tuple[str, ...]]:
    existing = parse_dotenv(target.dotenv_text, file=str(target.dotenv)) if target.dotenv_text else {}
    known = ChainMap(target.secrets, existing, dict(environ))
    moved = []
    table = {**table, **{f: dict(table[f]) for f in ("env", "headers") if f in table}}
    for field, key in literals:
        escaped = table[field][key]
        value = escaped.replace("$$", "$")
        if not is_secret(key, value, header=field == "headers"):
            continue
        base = _variable(key if field == "env" else f"{name}_{key}")
        variable, number = base, 1
        while variable in known and known[variable] != value:
            variable = f"{base}_{_variable(name)}" if number == 1 else f"{base}_{_variable(name)}_{number}"
            number += 1
        target.secrets[variable] = value
        table[field][key] = f"${{{variable}}}"
        moved.append(variable)
    return table, tuple(moved)


def plan_import(
    survey: Survey,
    clients: Sequence[str],
    *,
    assern_home: Path,
    environ: Mapping[str, str],
) -> ImportPlan:
    """What importing `clients` would add, where, and what it would skip or rename.

    Reads assern's files; writes nothing.

    Raises:
        ImportRefused: a client was not found, or assern's configuration does not read.
    """
    found: dict[str, ClientFinding] = {finding.client: finding for finding in survey.clients}
    missing = [c for c in clients if c not in found]
    if missing:
        raise ImportRefused(f"not found here: {', '.join(missing)} (see `assernctl clients`)")
    home = user_home(environ)
    global_target = _target(assern_home / "config.toml", None, assern_home, home, {})
    targets: dict[Path, Target] = {global_target.config: global_target}
    skipped: list[Skipped] = []
    clashes: list[str] = []
    origins: dict[tuple[Path, str], str] = {}
    for client in dict.fromkeys(clients):
        for finding in found[client].servers:
            server = finding.server
            if finding.reach == "assern":
                continue
            translated = translate(server)
            if translated.problem is not None:
                skipped.append(Skipped(source=server, reason=f"cannot be imported: {translated.problem}"))
                continue
            root = server.location.root if server.location.scope == "project" else None
            config = global_target.config if root is None else local_config(root)
            if config not in targets:
                targets[config] = _target(config, root, assern_home, home, global_target.launches)
            target = targets[config]
            key = launch(translated.table)
            same = next((n for n, k in target.launches.items() if k == key), None)
            if same is not None:
                earlier = origins.get((config, same))
                where = f"imported from {earlier} as {same!r}" if earlier else f"assern runs it as {same!r}"
                skipped.append(Skipped(source=server, reason=f"already there: {where}"))
                continue
            name = server.name
            if name in target.launches:
                taken = name
                name, number = f"{taken}-{client}", 2
                while name in target.launches:
                    name, number = f"{taken}-{client}-{number}", number + 1
                owner = origins.get((config, taken), "assern's configuration")
                clashes.append(
                    f"{client}'s {taken!r} is not the {taken!r} of {owner}: added as {name!r} "
                    f"(rename it in {target.config} if you like)"
                )
            table, moved = _move_secrets(name, translated.table, translated.literals, target, environ)
            target.launches[name] = key
            origins[(config, name)] = client
            target.added.append(
                Added(source=server, name=name, table=table, moved=moved, notes=translated.notes)
            )
    planned = tuple(t for t in targets.values() if t.added)
    warnings = [w for target in planned for w in _check(target, environ)]
    return ImportPlan(
        targets=planned, skipped=tuple(skipped), clashes=tuple(clashes), warnings=tuple(warnings)
    )


def new_config_text(target: Target) -> str:
    """The config file's text with the target's servers added (after the last one).

    Raises:
        ImportRefused: the file's servers are written in a way that cannot be added to.
    """
    text = target.text if target.text is not None else NEW_CONFIG_HEADER
    for added in target.added:
        comment = f"from {added.source.client}: {added.source.location.path}"
        try:
            text = with_server(text, added.name, added.table, parent="servers", comment=comment)
        except TomlEditError as exc:
            raise ImportRefused(f"{target.config}: {exc}") from None
    return text


def _dotenv_line(name: str, value: str) -> str:
    if _BARE_VALUE.fullmatch(value):
        return f"{name}={value}"
    if "'" not in value and "\n" not in value and "\r" not in value:
        return f"{name}='{value}'"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'{name}="{escaped.replace(chr(9), chr(92) + "t")}"'


def new_dotenv_text(target: Target) -> str | None:
    """The .env file's text with the moved secrets added, or None when none moved.

    Raises:
        ImportRefused: a value would not read back as it was.
    """
    if not target.secrets:
        return None
    text = target.dotenv_text or ""
    if text and not text.endswith("\n"):
        text += "\n"
    text += "# moved here by `assernctl clients import`\n"
    text += "".join(_dotenv_line(name, value) + "\n" for name, value in target.secrets.items())
    parsed = parse_dotenv(text, file=str(target.dotenv))
    if any(parsed.get(name) != value for name, value in target.secrets.items()):
        raise ImportRefused(f"{target.dotenv}: a secret would not read back as it is; nothing was written")
    return text


def validate(target: Target, text: str) -> None:
    """Read the new config text as the loader reads its file.

    Raises:
        ImportRefused: the loader would refuse it; every problem is listed.
    """
    file = str(target.config)
    try:
        document = parse_toml(text, file=file)
        if target.root is None:
            model = structure(document, ConfigFile, file=file)
            problems = model.problems(included=target.included)
        else:
            local = structure(document, LocalConfigFile, file=file)
            problems = [
                p
                for n, s in local.servers.items()
                for p in server_problems(n, s, defines=False, path=("servers",))
            ]
    except ConfigError as exc:
        raise ImportRefused(f"the result would not load; nothing was written:\n{exc}") from None
    if problems:
        raise ImportRefused(
            "the result would not load; nothing was written:\n" + "\n".join(f"{file}: {p}" for p in problems)
        )


def _check(target: Target, environ: Mapping[str, str]) -> list[str]:
    """Validate the target's new text; return the variables nothing defines (warnings)."""
    text = new_config_text(target)
    validate(target, text)
    dotenvs: list[dict[str, str]] = [target.secrets]
    for path in (target.dotenv, target.global_dotenv):
        if path is None:
            continue
        try:
            dotenvs.append(dict(read_dotenv(path) or {}))
        except ConfigError:
            continue
    document = parse_toml(text, file=str(target.config))
    added = {a.name for a in target.added}
    mine = {"servers": {k: v for k, v in document.get("servers", {}).items() if k in added}}
    lookup = ChainMap(*dotenvs, dict(environ))
    return [
        f"{target.config}: {p} (set it in {target.dotenv} or the environment)"
        for p in undefined_references(mine, lookup)
    ]


def apply(plan: ImportPlan) -> list[Path]:
    """Write each target's .env file, then its config file.

    Returns:
        The files written.

    Raises:
        ImportRefused: a file changed since it was read, or cannot be written; the files
            written before it stay (a .env file's new variables are harmless alone).
    """
    written = []
    for target in plan.targets:
        config_text = new_config_text(target)
        validate(target, config_text)
        for path, old, new in (
            (target.dotenv, target.dotenv_text, new_dotenv_text(target)),
            (target.config, target.text, config_text),
        ):
            if new is None:
                continue
            _write(path, old, new)
            written.append(path)
    return written


def _write(path: Path, old: str | None, new: str) -> None:
    if old is None:
        if not write_new(path, new):
            raise ImportRefused(f"{path}: it appeared while the import ran; nothing more was written")
        return
    try:
        snap = snapshot(path)
        if snap.data != old.encode("utf-8"):
            raise FileRefused(f"{path}: the file changed since it was read; nothing more was written")
        replace(snap, new.encode("utf-8"))
    except FileRefused as exc:
        raise ImportRefused(str(exc)) from None


def project_hint(plan: ImportPlan) -> list[Path]:
    """The project folders whose `.assern/config.toml` the import writes (they need trust)."""
    return [target.root for target in plan.targets if target.root is not None]
