"""Layered resolution: the environment and every config file in, one `ResolvedConfig` out.

Layers, lowest first (DESIGN.md §3): the system environment; `$ASSERN_HOME/.env`; the
global config (`$ASSERN_HOME/config.toml`, or the `config_path` that replaces it, with
its included `mcpServers` JSON files); the active `[projects.NAME]`; the project's
`.assern/.env`; the project's `.assern/config.toml` (with its includes). A folder's own
files (the last two, and an `mcpServers` file discovered in the working folder) apply
only once the folder is trusted (sources.py, trust.py); until then they are parsed and
left out.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from assern.actors.config.home import (
    GLOBAL_CONFIG,
    LOCAL_DIR,
    TOKENS_FILE,
    expand_user,
    user_home,
)
from assern.actors.config.keypath import at
from assern.actors.config.layers import GlobalSource, LocalSource, Origin, ServerLayer
from assern.actors.config.listen import ListenSpec, listen_problems, parse_bind
from assern.actors.config.merge import (
    EnvTable,
    Problems,
    ResolveContext,
    entries,
    policy_warnings,
    resolve_server,
)
from assern.actors.config.model import (
    GroupConfig,
    MiddlewareConfig,
    ProfileConfig,
    ProjectConfig,
    SettingsConfig,
    middleware_name,
)
from assern.actors.config.project import detect_project
from assern.actors.config.sources import read_sources
from assern.actors.config.spec import (
    CallRules,
    ConfigError,
    Group,
    MiddlewareSpec,
    Profile,
    Provenance,
    ResolvedConfig,
    SearchSettings,
    ServerSpec,
    Settings,
    dormancy,
)
from assern.actors.config.trust import Untrusted


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
            Without it, `$ASSERN_HOME/config.toml`, else a discovered cllm-mcp file
            (discover.py).
        project: `--project NAME`, which wins over detection; None to detect.
        cwd: The folder the user works in; the nearest `.assern/` is looked up from it.
        environ: The system environment (layer 1). HOME in it is the user's home.
        assern_home: The folder holding the global `.env` and `config.toml`.

    Returns:
        The settings, the enabled servers in declaration order, the project, the files
        that contributed, warnings, and what trust decided (`trust`).

    Raises:
        ConfigError: a file cannot be read or parsed, holds wrong values, refers to an
            undefined variable, or `project` is unknown. The error names one file and
            lists every problem found in it.
    """
    environ = dict(environ)
    home = user_home(environ)
    cwd = Path(os.path.abspath(cwd))
    read = read_sources(config_path=config_path, cwd=cwd, environ=environ, assern_home=assern_home)
    warnings = list(read.warnings)
    source, local, local_root = read.source, read.local, read.local_root
    global_env_file, global_dotenv = read.global_env_file, read.global_dotenv
    local_env_file, local_dotenv = read.local_env_file, read.local_dotenv

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

    project_env: EnvTable | None = None
    if project_config and project_config.env is not None and match.name and source.file:
        project_env = EnvTable(
            values=project_config.env,
            path=("projects", match.name, "env"),
            provenance=Provenance(layer="project", file=str(source.file)),
        )
    context = ResolveContext(
        environ=environ,
        home=home,
        global_dotenv=entries(global_dotenv, "global-env", global_env_file),
        local_dotenv=entries(local_dotenv, "local-env", local_env_file),
        project_env=project_env,
        default_root=local_root or cwd,
        assern_home=assern_home,
    )
    problems = Problems()
    servers: dict[str, ServerSpec] = {}
    for name, layers in _enabled_stacks(source, local, match.name, project_config).items():
        spec = resolve_server(name, layers, context, problems)
        if spec is not None:
            servers[name] = spec
            warnings += policy_warnings(spec)
    try:
        problems.raise_first(files)
    except ConfigError as exc:
        raise _with_trust_note(exc, read.trust.untrusted) from None
    profiles = _profiles(source.profiles, local.profiles if local else {})
    warnings += profile_warnings(profiles, servers)

    settings = _settings(source.settings, local.settings if local else None, profiles=profiles)
    servers = {
        name: attrs.evolve(
            spec, idle_timeout=dormancy(spec.idle_timeout, spec.keep_alive, settings.idle_timeout)
        )
        for name, spec in servers.items()
    }
    settings = attrs.evolve(
        settings,
        groups=_groups(source.groups, local.groups if local else {}),
        middleware=tuple(_middleware(entry) for entry in source.middleware),
    )
    return ResolvedConfig(
        settings=settings,
        listen=_listen(source, assern_home=assern_home, home=home),
        servers=servers,
        project=match.name,
        files=tuple(dict.fromkeys(files)),
        warnings=tuple(warnings),
        potential_files=_potential_files(
            assern_home,
            global_config=config_path is None,
            local_root=local_root,
            cwd=cwd,
            discovered=read.choice.candidates,
        ),
        trust=read.trust,
        cwd=cwd,
        local_root=local_root,
    )


def _with_trust_note(error: ConfigError, untrusted: Sequence[Untrusted]) -> ConfigError:
    """The error, and a word on the folders left out: a variable the global config takes
    from a project's `.assern/.env` is undefined until that folder is trusted."""
    if not untrusted:
        return error
    notes = tuple(
        f"(not read: {item.project.folder}'s own files, which are not trusted; "
        f"if a value should come from them, review and allow them with `{item.command}`)"
        for item in untrusted
    )
    return ConfigError(error.file, (*error.problems, *notes))


def _potential_files(
    assern_home: Path,
    *,
    global_config: bool,
    local_root: Path | None,
    cwd: Path,
    discovered: tuple[Path, ...] = (),
) -> tuple[Path, ...]:
    """The files that do not exist now but would contribute if they were created.

    Candidates: the global .env, the global config.toml (unless `--config` replaces it),
    the `.assern/.env` and `.assern/config.toml` of the project root, or of `cwd` when
    there is no project root yet, and cllm-mcp's files when discovery applies.
    """
    candidates = [assern_home / ".env"]
    if global_config:
        candidates.append(assern_home / GLOBAL_CONFIG)
    root = local_root or cwd
    candidates += [root / LOCAL_DIR / ".env", root / LOCAL_DIR / "config.toml", *discovered]
    return tuple(path for path in candidates if not path.is_file())


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


def _settings(*layers: SettingsConfig | None, profiles: tuple[Profile, ...] = ()) -> Settings:
    defaults = Settings()
    naming, max_name_length = defaults.naming, defaults.max_name_length
    initialize_wait = defaults.initialize_wait
    idle_timeout = defaults.idle_timeout
    exposure, pinned = defaults.exposure, defaults.pinned
    max_tools, max_list_tokens = defaults.max_tools, defaults.max_list_tokens
    search: dict[str, Any] = {}
    description_format = defaults.description_format
    rules: dict[str, Any] = {}
    for layer in layers:
        if layer is None:
            continue
        if layer.description_format is not None:
            description_format = layer.description_format
        rules.update(_rule_fields(layer))
        naming = layer.naming if layer.naming is not None else naming
        if layer.max_name_length is not None:
            max_name_length = layer.max_name_length
        if layer.initialize_wait is not None:
            initialize_wait = float(layer.initialize_wait)
        if layer.idle_timeout is not None:
            idle_timeout = float(layer.idle_timeout)
        exposure = layer.exposure if layer.exposure is not None else exposure
        pinned = layer.pinned if layer.pinned is not None else pinned
        max_tools = layer.max_tools if layer.max_tools is not None else max_tools
        max_list_tokens = layer.max_list_tokens if layer.max_list_tokens is not None else max_list_tokens
        if layer.search is not None:
            if layer.search.semantic is not None:
                search["semantic"] = layer.search.semantic
            if layer.search.learn is not None:
                search["learn"] = layer.search.learn
            if layer.search.fields is not None:
                fields = attrs.asdict(layer.search.fields, recurse=False)
                search.update({key: float(value) for key, value in fields.items() if value is not None})
    return Settings(
        naming=naming,
        max_name_length=max_name_length,
        initialize_wait=initialize_wait,
        idle_timeout=idle_timeout,
        exposure=exposure,
        pinned=pinned,
        max_tools=max_tools,
        max_list_tokens=max_list_tokens,
        profiles=profiles,
        search=SearchSettings(**search),
        description_format=description_format,
        rules=CallRules(**rules),
    )


def _rule_fields(layer: SettingsConfig | ProfileConfig) -> dict[str, Any]:
    """The deny, read_only, validate and confirm one table sets."""
    fields = {key: getattr(layer, key) for key in ("deny", "read_only", "validate", "confirm")}
    return {key: value for key, value in fields.items() if value is not None}


def _middleware(entry: MiddlewareConfig) -> MiddlewareSpec:
    return MiddlewareSpec(
        name=middleware_name(entry),
        use=entry.use,
        servers=entry.servers,
        tools=entry.tools,
        options=dict(entry.options),
        asyncio=entry.asyncio,
    )


def _listen(source: GlobalSource, *, assern_home: Path, home: Path) -> ListenSpec:
    """`[listen]` of the global file, its paths made absolute (relative to that file).

    Raises:
        ConfigError: naming the file and the key when the front would be unsafe.
    """
    table = source.listen
    default_tokens = assern_home / TOKENS_FILE
    if table is None:
        return ListenSpec(tokens_file=default_tokens)
    base = source.file.parent if source.file is not None else assern_home

    def path(value: str | None) -> Path | None:
        return None if value is None else base / expand_user(value, home)

    given = {
        key: value
        for key, value in attrs.asdict(table, recurse=False).items()
        if value is not None and key not in ("http", "tokens_file", "certfile", "keyfile")
    }
    spec = ListenSpec(
        http=parse_bind(table.http) if table.http is not None else None,
        tokens_file=path(table.tokens_file) or default_tokens,
        certfile=path(table.certfile),
        keyfile=path(table.keyfile),
        **given,
    )
    problems = [at(problem, ("listen", key)) for key, problem in listen_problems(spec)]
    if problems:
        raise ConfigError(str(source.file), tuple(problems))
    return spec


def _groups(*files: Mapping[str, GroupConfig]) -> tuple[Group, ...]:
    """The groups of every file; a local table replaces the global one of its name."""
    merged: dict[str, GroupConfig] = {}
    for tables in files:
        merged.update(tables)
    return tuple(
        Group(name=name, tools=table.tools, description=table.description) for name, table in merged.items()
    )


def profile_warnings(profiles: tuple[Profile, ...], servers: Mapping[str, ServerSpec]) -> list[str]:
    """A profile that names a server this configuration does not run (a typo, or a
    server of another project) shows nothing of it: worth a word, not an error."""
    warnings = []
    for profile in profiles:
        for key in ("servers", "exclude_servers"):
            for name in getattr(profile, key) or ():
                if name not in servers:
                    known = ", ".join(servers) or "none"
                    warnings.append(
                        f"profile {profile.name!r}: {key} names {name!r}, which is not a server "
                        f"of this configuration (servers: {known})"
                    )
    return warnings


def _profiles(*files: Mapping[str, ProfileConfig]) -> tuple[Profile, ...]:
    """The profiles of every file, in declaration order (the global file's first); a later
    file's table of the same name overrides the fields it sets."""
    merged: dict[str, dict[str, Any]] = {}
    rules: dict[str, dict[str, Any]] = {}
    for tables in files:
        for name, table in tables.items():
            fields = merged.setdefault(name, {})
            fields.update(
                {
                    key: value
                    for key, value in attrs.asdict(table, recurse=False).items()
                    if value is not None and key not in _RULE_KEYS
                }
            )
            rules.setdefault(name, {}).update(_rule_fields(table))
    return tuple(
        Profile(name=name, rules=CallRules(**rules[name]), **fields) for name, fields in merged.items()
    )


_RULE_KEYS = frozenset(("deny", "read_only", "validate", "confirm"))
