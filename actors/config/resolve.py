"""Layered resolution: the environment and every config file in, one `ResolvedConfig` out.

Layers, lowest first (DESIGN.md §3): the system environment; `$ASSERN_HOME/.env`; the
global config (`$ASSERN_HOME/config.toml`, or the `config_path` that replaces it, with
its included `mcpServers` JSON files); the active `[projects.NAME]`; the project's
`.assern/.env`; the project's `.assern/config.toml` (with its includes).

Which servers: every global server (those of included JSON files first), or only the
ones a project's `servers = [...]` names; plus every server that the project's
`[projects.P.servers.X]` tables or the local config define or override; minus those
whose merged `disabled` is true. Order is declaration order.

A server's fields: a higher layer's table wins field by field where it sets a value;
`args` and `allowed` are replaced whole; `headers` merge key by key. A relative `cwd`
is taken from the config file's folder (the project root for the local config).

A server's process env, lowest first:

1. the system environment;
2. the global .env;
3. `merge_env(server env, project env, merge_mode)`, where the server env is its global
   tables' `env` and the project env is `[projects.P].env` overlaid by
   `[projects.P.servers.X].env` (None when the project sets neither);
4. the local .env;
5. the local config's `[servers.X].env`.

Both .env files reach every server's process env whole, as the system environment does.

`${VAR}` in command, args, cwd, url, headers and env values expands from the system
environment and the .env files (local over global over system). An env value may also
use the values that the layers below it gave the same server. Only the servers that end
up enabled are expanded, so an unused server's missing variable is not an error.
"""

import os
from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from assern.actors.config.env import ExpansionError, MergeMode, expand_vars, merge_env
from assern.actors.config.keypath import KeyPath, at, format_key_path
from assern.actors.config.layers import (
    GlobalSource,
    LocalSource,
    Origin,
    ServerLayer,
    read_dotenv,
    read_global,
    read_local,
)
from assern.actors.config.model import ProjectConfig, ServerConfig, SettingsConfig
from assern.actors.config.policy import intensity_unreachable
from assern.actors.config.project import (
    LOCAL_DIR,
    detect_project,
    expand_user,
    find_local_root,
    user_home,
)
from assern.actors.config.spec import (
    ConfigError,
    Layer,
    Provenance,
    ResolvedConfig,
    ServerSpec,
    Settings,
)
from assern.actors.config.yaml_layout import yaml_available
from assern.supervisor.intensity import backoff_total
from assern.supervisor.spec import Restart, RestartPolicy

#: The global config file in `$ASSERN_HOME`.
GLOBAL_CONFIG = "config.toml"
#: The original Assern layout's global config, read when config.toml is absent and
#: PyYAML is installed.
LEGACY_GLOBAL_CONFIG = "config.yaml"

#: An env value and where it came from.
Entry = tuple[str, Provenance]

#: ServerConfig fields merged by "the highest layer that sets it wins".
_PLAIN_FIELDS = tuple(
    field.name for field in attrs.fields(ServerConfig) if field.name not in ("env", "headers")
)


def default_assern_home(environ: Mapping[str, str]) -> Path:
    """`$ASSERN_HOME` (with `~` expanded), else `~/.valksor/assern`.

    Args:
        environ: The process environment; its HOME, when set, is the user's home.
    """
    home = user_home(environ)
    configured = environ.get("ASSERN_HOME")
    if configured:
        return Path(expand_user(configured, home))
    return home / ".valksor" / "assern"


def resolve_config(
    *,
    config_path: Path | None,
    project: str | None,
    cwd: Path,
    environ: Mapping[str, str],
    assern_home: Path,
) -> ResolvedConfig:
    """Read every layer and resolve it into the servers assern runs.

    Args:
        config_path: A config file replacing `$ASSERN_HOME/config.toml` (`--config`):
            TOML, or an `mcpServers` JSON file when its suffix is `.json`. Relative to
            `cwd`. It must exist.
        project: `--project NAME`, which wins over detection; None to detect.
        cwd: The folder the user works in; the nearest `.assern/` is looked up from it.
        environ: The system environment (layer 1). HOME in it is the user's home.
        assern_home: The folder holding the global `.env` and `config.toml`.

    Returns:
        The settings, the enabled servers in declaration order, the project, the files
        that contributed, and warnings.

    Raises:
        ConfigError: a file cannot be read or parsed, holds wrong values, refers to an
            undefined variable, or `project` is unknown. The error names one file and
            lists every problem found in it.
    """
    environ = dict(environ)
    home = user_home(environ)
    cwd = Path(os.path.abspath(cwd))
    warnings: list[str] = []

    global_env_file = assern_home / ".env"
    global_dotenv = read_dotenv(global_env_file)
    if config_path is not None:
        source = read_global(cwd / config_path, required=True, home=home)
    else:
        source = read_global(assern_home / GLOBAL_CONFIG, required=False, home=home)
        legacy = assern_home / LEGACY_GLOBAL_CONFIG
        if source.file is None and legacy.is_file():
            if yaml_available():
                source = read_global(legacy, required=True, home=home)
            else:
                warnings.append(
                    f"{legacy} is not read: reading YAML needs PyYAML (pip install 'assern[yaml]'), "
                    "or convert it with `assernctl config import`"
                )
    warnings += source.notes

    local_root = find_local_root(cwd)
    local_env_file = local_root / LOCAL_DIR / ".env" if local_root else None
    local_dotenv = read_dotenv(local_env_file) if local_env_file else None
    local = read_local(local_root, home=home) if local_root else None

    match = detect_project(
        explicit=project,
        cwd=cwd,
        home=home,
        projects={name: p.directories for name, p in source.projects.items()},
        local_root=local_root,
        local_project=local.project if local else None,
        config_file=str(source.file) if source.file else None,
    )
    project_config = source.projects.get(match.name) if match.name else None
    if local and local.project:
        if match.source == "argument" and match.name != local.project:
            warnings.append(
                f"--project {match.name} wins over project {local.project!r} named in {local.file}"
            )
        elif local.project not in source.projects:
            warnings.append(
                f"project {local.project!r} named in {local.file} is not defined in the "
                "global config; only the local files apply"
            )

    files = [global_env_file] if global_dotenv is not None else []
    files += source.files
    if local_env_file and local_dotenv is not None:
        files.append(local_env_file)
    if local:
        files += local.files

    project_env: _EnvTable | None = None
    if project_config and project_config.env is not None and match.name and source.file:
        project_env = _EnvTable(
            values=project_config.env,
            path=("projects", match.name, "env"),
            provenance=Provenance(layer="project", file=str(source.file)),
        )
    context = _Context(
        environ=environ,
        home=home,
        global_dotenv=_entries(global_dotenv, "global-env", global_env_file),
        local_dotenv=_entries(local_dotenv, "local-env", local_env_file),
        project_env=project_env,
    )
    problems = _Problems()
    servers: dict[str, ServerSpec] = {}
    for name, layers in _enabled_stacks(source, local, match.name, project_config).items():
        spec = _resolve_server(name, layers, context, problems)
        if spec is not None:
            servers[name] = spec
            warnings += _policy_warnings(spec)
    problems.raise_first(files)

    return ResolvedConfig(
        settings=_settings(source.settings, local.settings if local else None),
        servers=servers,
        project=match.name,
        files=tuple(dict.fromkeys(files)),
        warnings=tuple(warnings),
        potential_files=_potential_files(
            assern_home,
            global_config=config_path is None and source.file is None,
            local_root=local_root,
            cwd=cwd,
        ),
    )


def _potential_files(
    assern_home: Path, *, global_config: bool, local_root: Path | None, cwd: Path
) -> tuple[Path, ...]:
    """The files that do not exist now but would contribute if they were created.

    Candidates: the global .env, the global config.toml (unless `--config` replaces it),
    and the `.assern/.env` and `.assern/config.toml` of the project root, or of `cwd`
    when there is no project root yet.
    """
    candidates = [assern_home / ".env"]
    if global_config:
        candidates.append(assern_home / GLOBAL_CONFIG)
    root = local_root or cwd
    candidates += [root / LOCAL_DIR / ".env", root / LOCAL_DIR / "config.toml"]
    return tuple(path for path in candidates if not path.is_file())


@attrs.frozen(kw_only=True)
class _Context:
    """What every server's resolution shares: the env layers and the active project."""

    environ: Mapping[str, str]
    home: Path
    global_dotenv: Mapping[str, Entry]
    local_dotenv: Mapping[str, Entry]
    #: `[projects.P].env` of the active project, when it has one.
    project_env: "_EnvTable | None"

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
        )


class _Problems:
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


def _entries(values: Mapping[str, str] | None, layer: Layer, file: Path | None) -> dict[str, Entry]:
    provenance = Provenance(layer=layer, file=str(file) if file else None)
    return {key: (value, provenance) for key, value in (values or {}).items()}


def _values(entries: Mapping[str, Entry]) -> dict[str, str]:
    return {key: value for key, (value, _) in entries.items()}


def _enabled_stacks(
    source: GlobalSource,
    local: LocalSource | None,
    project: str | None,
    project_config: ProjectConfig | None,
) -> dict[str, tuple[ServerLayer, ...]]:
    """Every server's tables across the levels, for the servers the project enables.

    A project's `servers = [...]` list filters the global servers; a server that the
    project's tables or the local config name is always included (the more specific
    file asked for it). `disabled` is applied later, on the merged fields.
    """
    stacks = {name: tuple(layers) for name, layers in source.servers.items()}
    enabled = set(stacks)
    if project_config is not None and project_config.enabled is not None:
        enabled = set(project_config.enabled)
    if project_config is not None and project is not None and source.file is not None:
        for name, config in project_config.overrides.items():
            origin = Origin(
                layer="project",
                level="project",
                file=source.file,
                prefix=("projects", project, "servers", name),
                base_dir=source.file.parent,
            )
            stacks[name] = (*stacks.get(name, ()), ServerLayer(config=config, origin=origin))
            enabled.add(name)
    if local is not None:
        for name, layers in local.servers.items():
            stacks[name] = (*stacks.get(name, ()), *layers)
            enabled.add(name)
    return {name: layers for name, layers in stacks.items() if name in enabled}


def _resolve_server(
    name: str, layers: tuple[ServerLayer, ...], context: _Context, problems: _Problems
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
    args: tuple[str, ...] = ()
    if (found_args := fields.get("args")) is not None:
        values, origin = found_args
        args = tuple(_expand(arg, lookup, origin, ("args", i), problems) for i, arg in enumerate(values))
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
        policy=_policy(fields),
        start=_value(fields, "start", "eager"),
        timeout=float(_value(fields, "timeout", 60.0)),
        startup_timeout=float(_value(fields, "startup_timeout", 30.0)),
        idle_timeout=_float_or_none(_value(fields, "idle_timeout", None)),
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


def _check_reachable(
    layers: tuple[ServerLayer, ...],
    fields: Mapping[str, tuple[Any, Origin]],
    problems: _Problems,
) -> bool:
    """The merged server says how to reach it: one of command or url, a fitting transport."""
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
    value: str, lookup: Mapping[str, str], origin: Origin, suffix: KeyPath, problems: _Problems
) -> str:
    try:
        return expand_vars(value, lookup)
    except ExpansionError as exc:
        problems.add(origin.file, (*origin.prefix, *suffix), str(exc))
        return value


def _resolve_cwd(cwd: str | None, fields: Mapping[str, tuple[Any, Origin]], home: Path) -> str | None:
    """An absolute cwd: `~` expanded, a relative one taken from the table's base folder."""
    if cwd is None:
        return None
    base = fields["cwd"][1].base_dir
    return os.path.normpath(base / expand_user(cwd, home))


def _resolve_headers(
    layers: Iterable[ServerLayer], lookup: Mapping[str, str], problems: _Problems
) -> dict[str, str]:
    headers: dict[str, str] = {}
    for layer in layers:
        for key, value in (layer.config.headers or {}).items():
            headers[key] = _expand(value, lookup, layer.origin, ("headers", key), problems)
    return headers


def _resolve_env(
    layers: tuple[ServerLayer, ...], mode: MergeMode, context: _Context, problems: _Problems
) -> tuple[dict[str, str], dict[str, Provenance]]:
    """The complete process env of one server and the provenance of its non-system keys."""
    tables = {
        level: [_EnvTable.of(layer) for layer in layers if layer.origin.level == level]
        for level in ("global", "project", "local")
    }
    project_tables = [context.project_env, *tables["project"]]
    project_tables = [table for table in project_tables if table and table.values is not None]

    replaced = mode == "replace" and bool(project_tables)
    server_env: dict[str, Entry] = {}
    if not replaced:  # a replaced server env is never used, so it is not expanded either
        for table in tables["global"]:
            server_env |= table.expand(context.lookup(lower=server_env), problems)
    project_env: dict[str, Entry] | None = None
    if project_tables:
        project_env = {}
        for table in project_tables:
            project_env |= table.expand(context.lookup(lower=server_env | project_env), problems)
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
class _EnvTable:
    """One `env` table as written, with its key path and provenance."""

    values: Mapping[str, str] | None
    path: KeyPath
    provenance: Provenance

    @classmethod
    def of(cls, layer: ServerLayer) -> "_EnvTable":
        origin = layer.origin
        return cls(values=layer.config.env, path=(*origin.prefix, "env"), provenance=origin.provenance)

    def expand(self, lookup: Mapping[str, str], problems: _Problems) -> dict[str, Entry]:
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


def _policy_warnings(spec: ServerSpec) -> list[str]:
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


def _settings(*layers: SettingsConfig | None) -> Settings:
    defaults = Settings()
    naming, max_name_length = defaults.naming, defaults.max_name_length
    initialize_wait = defaults.initialize_wait
    for layer in layers:
        if layer is None:
            continue
        naming = layer.naming if layer.naming is not None else naming
        if layer.max_name_length is not None:
            max_name_length = layer.max_name_length
        if layer.initialize_wait is not None:
            initialize_wait = float(layer.initialize_wait)
    return Settings(naming=naming, max_name_length=max_name_length, initialize_wait=initialize_wait)
