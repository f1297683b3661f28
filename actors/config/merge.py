"""One server's layers merged, checked and expanded into its `ServerSpec`.

`resolve_config` (resolve.py) decides which servers a configuration enables and with
which env layers (`ResolveContext`); `resolve_server` turns each one's tables into a
spec: fields merged layer by layer (the highest that sets a field wins; `headers` merge
key by key), a relative `cwd` taken from its file's folder, `${VAR}` expanded, the
process env built layer by layer (module docstring of resolve.py) with each key's
provenance, and the restart policy checked. Problems are collected, never raised one
by one (`Problems`).
"""

import hashlib
import os
import sys
import urllib.parse
from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from assern.actors.config.env import ExpansionError, MergeMode, expand_vars, merge_env
from assern.actors.config.home import expand_user
from assern.actors.config.keypath import KeyPath, at, format_key_path
from assern.actors.config.layers import Origin, ServerLayer
from assern.actors.config.model import ServerConfig
from assern.actors.config.policy import intensity_unreachable
from assern.actors.config.spec import CallRules, ConfigError, Layer, Provenance, ServerSpec
from assern.actors.config.structure import show
from assern.supervisor.intensity import backoff_total
from assern.supervisor.spec import Restart, RestartPolicy

#: An env value and where it came from.
Entry = tuple[str, Provenance]

#: ServerConfig fields merged by "the highest layer that sets it wins".
_PLAIN_FIELDS = tuple(
    field.name for field in attrs.fields(ServerConfig) if field.name not in ("env", "headers")
)


#: The variable `${ASSERN_PROJECT_ROOT}` (see `ResolveContext.lookup`).
PROJECT_ROOT_VARIABLE = "ASSERN_PROJECT_ROOT"


@attrs.frozen(kw_only=True)
class ResolveContext:
    """What every server's resolution shares: the env layers and the active project."""

    environ: Mapping[str, str]
    home: Path
    global_dotenv: Mapping[str, Entry]
    local_dotenv: Mapping[str, Entry]
    #: `[projects.P].env` of the active project, when it has one.
    project_env: "EnvTable | None"
    #: A builtin context server's default root: the project's root, else the current folder.
    default_root: Path | None = None
    #: `$ASSERN_HOME`, where a builtin context server keeps its index.
    assern_home: Path | None = None

    def lookup(
        self, upper: Mapping[str, Entry] | None = None, lower: Mapping[str, Entry] | None = None
    ) -> ChainMap[str, str]:
        """Variables for `${VAR}`, highest first: `upper`, local .env, `lower`, global
        .env, system environment (the order in which they reach the process env)."""
        return ChainMap(
            _values(upper or {}),
            _values(self.local_dotenv),
            _values(lower or {}),
            _values(self.global_dotenv),
            dict(self.environ),
            self._provided(),
        )

    def _provided(self) -> dict[str, str]:
        """What assern defines itself, below everything else: `ASSERN_PROJECT_ROOT`, the
        project's root (the folder of its `.assern/`, else the folder resolved from), for
        a server that works on the project's files (`cwd = "${ASSERN_PROJECT_ROOT}"`).
        Only for `${VAR}`: it is not put in any process's environment."""
        if self.default_root is None:
            return {}
        return {PROJECT_ROOT_VARIABLE: str(self.default_root)}


class Problems:
    """Problems found while resolving, grouped by the file that holds the bad value."""

    def __init__(self) -> None:
        self._by_file: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return sum(len(problems) for problems in self._by_file.values())

    def add(self, file: Path | str | None, path: KeyPath, message: str) -> None:
        self._by_file.setdefault(str(file), []).append(at(message, path))

    def raise_first(self, files: Sequence[Path]) -> None:
        """Raise a ConfigError for the lowest-layer file that has problems.

        Args:
            files: The contributing files in layer order, lowest first.
        """
        order = {str(file): index for index, file in enumerate(files)}
        for file in sorted(self._by_file, key=lambda f: order.get(f, len(order))):
            raise ConfigError(file, tuple(dict.fromkeys(self._by_file[file])))


def entries(values: Mapping[str, str] | None, layer: Layer, file: Path | None) -> dict[str, Entry]:
    provenance = Provenance(layer=layer, file=str(file) if file else None)
    return {key: (value, provenance) for key, value in (values or {}).items()}


def _values(entries: Mapping[str, Entry]) -> dict[str, str]:
    return {key: value for key, (value, _) in entries.items()}


def resolve_server(
    name: str, layers: tuple[ServerLayer, ...], context: ResolveContext, problems: Problems
) -> ServerSpec | None:
    """Merge, check and expand one server; None when it is disabled or has problems."""
    fields = _merge_fields(layers)
    disabled = fields.get("disabled")
    if disabled is not None and disabled[0]:
        return None
    if not _check_reachable(layers, fields, problems):
        return None

    lookup = context.lookup()
    problems_before = len(problems)

    def expand(field: str) -> str | None:
        found = fields.get(field)
        if found is None:
            return None
        return _expand(found[0], lookup, found[1], (field,), problems)

    command = expand("command")
    url = expand("url")
    _check_command(command, fields, problems)
    _check_url(url, fields, problems)
    args: tuple[str, ...] = ()
    if (found_args := fields.get("args")) is not None:
        values, origin = found_args
        args = tuple(_expand(arg, lookup, origin, ("args", i), problems) for i, arg in enumerate(values))
    if "builtin" in fields:
        command, args = sys.executable, _builtin_args(fields, expand("root"), context, problems)
    cwd = _resolve_cwd(expand("cwd"), fields, context.home)
    headers = _resolve_headers(layers, lookup, problems)
    mode: MergeMode = _value(fields, "merge_mode", "overlay")
    env, env_keys_from = _resolve_env(layers, mode, context, problems)
    if len(problems) > problems_before:
        return None

    transport = _value(fields, "transport", "stdio" if command is not None else "streamable-http")
    return ServerSpec(
        name=name,
        transport=transport,
        command=command,
        args=args,
        env=env,
        cwd=cwd,
        url=url,
        headers=headers,
        allowed=_value(fields, "allowed", None),
        rules=CallRules(
            deny=_value(fields, "deny", ()),
            read_only=_value(fields, "read_only", False),
            validate=_value(fields, "validate", None),
            confirm=_value(fields, "confirm", ()),
        ),
        policy=_policy(fields),
        start=_value(fields, "start", "eager"),
        timeout=float(_value(fields, "timeout", 60.0)),
        startup_timeout=float(_value(fields, "startup_timeout", 30.0)),
        idle_timeout=_float_or_none(_value(fields, "idle_timeout", None)),
        keep_alive=bool(_value(fields, "keep_alive", False)),
        protocol=_value(fields, "protocol", "legacy"),
        env_keys_from=env_keys_from,
    )


def _merge_fields(layers: Iterable[ServerLayer]) -> dict[str, tuple[Any, Origin]]:
    """Each plain field's winning value (the highest layer that sets it) and its origin."""
    fields: dict[str, tuple[Any, Origin]] = {}
    for layer in layers:
        for field in _PLAIN_FIELDS:
            value = getattr(layer.config, field)
            if value is not None:
                fields[field] = (value, layer.origin)
    return fields


def _value(fields: Mapping[str, tuple[Any, Origin]], field: str, default: Any) -> Any:
    found = fields.get(field)
    return default if found is None else found[0]


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


#: Keys only a builtin context server takes.
CONTEXT_KEYS = ("root", "exclude", "max_file_size", "secrets")
#: The module a builtin server runs, by `builtin` value (started as `python -I -m MODULE`).
BUILTIN_MODULES = {"context": "assern.context"}


def _check_builtin(fields: Mapping[str, tuple[Any, Origin]], problems: Problems) -> bool:
    """A builtin server says nothing of how to start it; other servers take no context keys."""
    builtin = fields.get("builtin")
    ok = True
    if builtin is None:
        for key in CONTEXT_KEYS:
            if (found := fields.get(key)) is not None:
                problems.add(
                    found[1].file,
                    (*found[1].prefix, key),
                    f'`{key}` is a key of the context server only (`builtin = "context"`)',
                )
                ok = False
        return ok
    for key in ("command", "url", "args"):
        if (found := fields.get(key)) is not None:
            problems.add(
                found[1].file,
                (*found[1].prefix, key),
                f"a builtin server takes no `{key}`: `builtin = {builtin[0]!r}` says what runs "
                f"(set in {builtin[1].file} @ {format_key_path(builtin[1].prefix)})",
            )
            ok = False
    transport = fields.get("transport")
    if transport is not None and transport[0] != "stdio":
        problems.add(
            transport[1].file,
            (*transport[1].prefix, "transport"),
            f"a builtin server runs over stdio, not {transport[0]!r}",
        )
        ok = False
    return ok


def _builtin_args(
    fields: Mapping[str, tuple[Any, Origin]], root: str | None, context: ResolveContext, problems: Problems
) -> tuple[str, ...]:
    """`-I -m assern.context --root ROOT ...` for a builtin context server; a root that is
    not an existing folder is a problem of the key that named it."""
    module = BUILTIN_MODULES[fields["builtin"][0]]
    if root is None:
        folder = context.default_root or Path.cwd()
    else:
        origin = fields["root"][1]
        folder = Path(os.path.normpath(origin.base_dir / expand_user(root, context.home)))
        if not folder.is_dir():
            what = "does not exist" if not folder.exists() else "is not a folder"
            problems.add(
                origin.file,
                (*origin.prefix, "root"),
                f"expected the folder to index, got {show(root)}, which {what} ({folder})",
            )
    args = ["-I", "-m", module, "--root", str(folder)]
    for pattern in _value(fields, "exclude", ()):
        args += ["--exclude", pattern]
    for pattern in _value(fields, "secrets", ()):
        args += ["--secret", pattern]
    if (size := _value(fields, "max_file_size", None)) is not None:
        args += ["--max-file-size", str(size)]
    if context.assern_home is not None:
        args += ["--db", str(database_path(context.assern_home, folder))]
    return tuple(args)


def database_path(assern_home: Path, root: Path) -> Path:
    """Where the context server of `root` keeps its index (the same rule as
    assern.context.store.database_path, which the process applies on its own)."""
    resolved = Path(os.path.realpath(root))
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:16]
    return assern_home / "cache" / "context" / f"{resolved.name[:40]}-{digest}.sqlite3"


def _check_reachable(
    layers: tuple[ServerLayer, ...],
    fields: Mapping[str, tuple[Any, Origin]],
    problems: Problems,
) -> bool:
    """The merged server says how to reach it: one of command or url, a fitting transport."""
    if not _check_builtin(fields, problems):
        return False
    if "builtin" in fields:
        return True
    command, url, transport = fields.get("command"), fields.get("url"), fields.get("transport")
    ok = True
    if command is None and url is None:
        first = layers[0].origin
        problems.add(first.file, first.prefix, "a server needs either `command` or `url`")
        ok = False
    elif command is not None and url is not None:
        # Blame the higher of the two, and say where the other one comes from.
        lower, higher = sorted((command, url), key=lambda found: _layer_index(layers, found[1]))
        other = "command" if lower is command else "url"
        here = "url" if other == "command" else "command"
        problems.add(
            higher[1].file,
            (*higher[1].prefix, here),
            f"a server takes either `command` or `url`, not both (`{other}` is set in "
            f"{lower[1].file} @ {format_key_path(lower[1].prefix)})",
        )
        ok = False
    if ok and transport is not None:
        wanted = "command" if transport[0] == "stdio" else "url"
        if fields.get(wanted) is None:
            problems.add(
                transport[1].file,
                (*transport[1].prefix, "transport"),
                f"transport {transport[0]!r} needs `{wanted}`",
            )
            ok = False
    return ok


def _layer_index(layers: tuple[ServerLayer, ...], origin: Origin) -> int:
    """Position of the table with `origin` in a server's stack (lowest layer is 0)."""
    return next(i for i, layer in enumerate(layers) if layer.origin is origin)


def _expand(
    value: str, lookup: Mapping[str, str], origin: Origin, suffix: KeyPath, problems: Problems
) -> str:
    try:
        return expand_vars(value, lookup)
    except ExpansionError as exc:
        problems.add(origin.file, (*origin.prefix, *suffix), str(exc))
        return value


def _check_command(command: str | None, fields: Mapping[str, tuple[Any, Origin]], problems: Problems) -> None:
    """A command that is blank, as written or once its variables are expanded, cannot run."""
    if command is None or command.strip():
        return
    written, origin = fields["command"]
    got = show(written) if written == command else f"{show(written)}, which is {show(command)} once expanded"
    problems.add(origin.file, (*origin.prefix, "command"), f"expected a command to run, got {got}")


def _check_url(url: str | None, fields: Mapping[str, tuple[Any, Origin]], problems: Problems) -> None:
    """A remote server's url must be http or https, with a host."""
    if url is None:
        return
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname
    except ValueError:  # e.g. a malformed IPv6 host or port
        parts, host = None, None
    if parts is not None and parts.scheme in ("http", "https") and host:
        return
    written, origin = fields["url"]
    got = show(written) if written == url else f"{show(written)}, which is {show(url)} once expanded"
    problems.add(
        origin.file, (*origin.prefix, "url"), f"expected an http:// or https:// URL with a host, got {got}"
    )


def _resolve_cwd(cwd: str | None, fields: Mapping[str, tuple[Any, Origin]], home: Path) -> str | None:
    """An absolute cwd: `~` expanded, a relative one taken from the table's base folder."""
    if cwd is None:
        return None
    base = fields["cwd"][1].base_dir
    return os.path.normpath(base / expand_user(cwd, home))


def _resolve_headers(
    layers: Iterable[ServerLayer], lookup: Mapping[str, str], problems: Problems
) -> dict[str, str]:
    headers: dict[str, str] = {}
    for layer in layers:
        for key, value in (layer.config.headers or {}).items():
            headers[key] = _expand(value, lookup, layer.origin, ("headers", key), problems)
    return headers


def _resolve_env(
    layers: tuple[ServerLayer, ...], mode: MergeMode, context: ResolveContext, problems: Problems
) -> tuple[dict[str, str], dict[str, Provenance]]:
    """The complete process env of one server and the provenance of its non-system keys."""
    tables = {
        level: [EnvTable.of(layer) for layer in layers if layer.origin.level == level]
        for level in ("global", "project", "local")
    }
    project_tables = [
        table
        for table in (context.project_env, *tables["project"])
        if table is not None and table.values is not None
    ]

    replaced = mode == "replace" and bool(project_tables)
    server_env: dict[str, Entry] = {}
    if not replaced:  # a replaced server env is never used, so it is not expanded either
        for table in tables["global"]:
            server_env |= table.expand(context.lookup(lower=server_env), problems)
    project_env: dict[str, Entry] | None = None
    if project_tables:
        expanded: dict[str, Entry] = {}
        for table in project_tables:
            expanded |= table.expand(context.lookup(lower=server_env | expanded), problems)
        project_env = expanded
    merged = merge_env(server_env, project_env, mode)
    local_env: dict[str, Entry] = {}
    for table in tables["local"]:
        local_env |= table.expand(context.lookup(upper=local_env, lower=merged), problems)

    env = dict(context.environ)
    provenance: dict[str, Provenance] = {}
    for entries in (context.global_dotenv, merged, context.local_dotenv, local_env):
        for key, (value, where) in entries.items():
            env[key] = value
            provenance[key] = where
    return env, provenance


@attrs.frozen(kw_only=True)
class EnvTable:
    """One `env` table as written, with its key path and provenance."""

    values: Mapping[str, str] | None
    path: KeyPath
    provenance: Provenance

    @classmethod
    def of(cls, layer: ServerLayer) -> "EnvTable":
        origin = layer.origin
        return cls(values=layer.config.env, path=(*origin.prefix, "env"), provenance=origin.provenance)

    def expand(self, lookup: Mapping[str, str], problems: Problems) -> dict[str, Entry]:
        """Every value expanded with `lookup`; an undefined variable is a problem."""
        out: dict[str, Entry] = {}
        for key, raw in (self.values or {}).items():
            try:
                out[key] = (expand_vars(raw, lookup), self.provenance)
            except ExpansionError as exc:
                problems.add(self.provenance.file, (*self.path, key), str(exc))
        return out


def _policy(fields: Mapping[str, tuple[Any, Origin]]) -> RestartPolicy:
    defaults = RestartPolicy()
    return RestartPolicy(
        restart=Restart(_value(fields, "restart", defaults.restart.value)),
        max_restarts=_value(fields, "max_restarts", defaults.max_restarts),
        restart_window=float(_value(fields, "restart_window", defaults.restart_window)),
        backoff_initial=float(_value(fields, "backoff_initial", defaults.backoff_initial)),
        backoff_max=float(_value(fields, "backoff_max", defaults.backoff_max)),
    )


def policy_warnings(spec: ServerSpec) -> list[str]:
    policy = spec.policy
    warnings: list[str] = []
    if intensity_unreachable(policy):
        warnings.append(
            f"server {spec.name!r}: with backoff from {policy.backoff_initial:g}s to "
            f"{policy.backoff_max:g}s, {policy.max_restarts} restarts take at least "
            f"{backoff_total(policy):g}s, longer than restart_window "
            f"({policy.restart_window:g}s); the restart limit can never be reached, so a "
            "crashing server is restarted forever"
        )
    if policy.backoff_initial > policy.backoff_max:
        warnings.append(
            f"server {spec.name!r}: backoff_initial ({policy.backoff_initial:g}s) is larger "
            f"than backoff_max ({policy.backoff_max:g}s); every delay will be backoff_max"
        )
    if spec.allowed == ():
        warnings.append(f"server {spec.name!r}: `allowed` is empty, so it exposes no tools")
    return warnings
