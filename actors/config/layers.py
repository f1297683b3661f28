"""Reading the config files into layers that remember where each table came from.

Each file is read and structured on its own, so an error always names the file at
fault. Server tables are kept as a stack per server name (lowest layer first), each
entry with its `Origin`; resolve.py merges the stacks.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs

from assern.actors.config.env import parse_dotenv
from assern.actors.config.home import LOCAL_DIR, ORIGINAL_SERVERS_FILE, expand_user
from assern.actors.config.keypath import at
from assern.actors.config.model import (
    ConfigFile,
    GroupConfig,
    ListenConfig,
    LocalConfigFile,
    MiddlewareConfig,
    ProfileConfig,
    ProjectConfig,
    ServerConfig,
    SettingsConfig,
    server_problems,
)
from assern.actors.config.spec import ConfigError, Layer, Provenance
from assern.actors.config.structure import loads_toml, parse_toml, show, structure
from assern.actors.config.yaml_layout import YAML_SUFFIXES, convert_global, parse_yaml

#: Which resolution level a server table belongs to: the global config (with its
#: includes), the active project's section, or the local `.assern/` files.
Level = Literal["global", "project", "local"]


@attrs.frozen(kw_only=True)
class Origin:
    """Where one server table (or env table) was written.

    Attributes:
        layer: The provenance layer word ("global-config", "mcp-json", ...).
        level: The resolution level the table belongs to.
        file: The file holding it.
        prefix: Key path of the table inside that file, e.g. ("servers", "github").
        base_dir: What a relative `cwd` in this table is relative to.
    """

    layer: Layer
    level: Level
    file: Path
    prefix: tuple[str | int, ...]
    base_dir: Path

    @property
    def provenance(self) -> Provenance:
        return Provenance(layer=self.layer, file=str(self.file))


@attrs.frozen(kw_only=True)
class ServerLayer:
    """One server table and where it came from."""

    config: ServerConfig
    origin: Origin


#: Server tables by name, in declaration order; each name's tables lowest layer first.
ServerStacks = Mapping[str, tuple[ServerLayer, ...]]


@attrs.frozen(kw_only=True)
class GlobalSource:
    """The global config file (TOML or `mcpServers` JSON) with its includes.

    Attributes:
        file: The config file, or None when there is none.
        settings: Its `[settings]`.
        servers: Included servers first, then the file's own tables.
        projects: Its `[projects.*]`.
        profiles: Its `[profiles.*]`.
        files: The files read, in order (the config file, then its includes).
        notes: What a converted file (the original YAML layout) could not carry over.
    """

    file: Path | None = None
    settings: SettingsConfig | None = None
    servers: ServerStacks = attrs.field(factory=dict)
    projects: Mapping[str, ProjectConfig] = attrs.field(factory=dict)
    profiles: Mapping[str, ProfileConfig] = attrs.field(factory=dict)
    groups: Mapping[str, GroupConfig] = attrs.field(factory=dict)
    middleware: tuple[MiddlewareConfig, ...] = ()
    listen: ListenConfig | None = None
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class LocalSource:
    """A project's `.assern/config.toml` with its includes.

    Attributes:
        root: The project root (the folder holding `.assern/`).
        file: The local config file, or None when `.assern/` has only a .env.
        project: Its `project = "NAME"`.
        settings: Its `[settings]`.
        servers: Included servers first, then the file's own tables.
        profiles: Its `[profiles.*]` (each overrides the global table of its name).
        files: The files read, in order.
    """

    root: Path
    file: Path | None = None
    project: str | None = None
    settings: SettingsConfig | None = None
    servers: ServerStacks = attrs.field(factory=dict)
    profiles: Mapping[str, ProfileConfig] = attrs.field(factory=dict)
    groups: Mapping[str, GroupConfig] = attrs.field(factory=dict)
    files: tuple[Path, ...] = ()


def read_text(path: Path) -> str | None:
    """A file's text, or None when it does not exist.

    Raises:
        ConfigError: it exists but cannot be read as UTF-8 text.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConfigError(str(path), ("cannot read the file: it is not UTF-8 text",)) from None
    except OSError as exc:
        raise ConfigError(str(path), (f"cannot read the file: {exc.strerror or exc}",)) from exc


def read_dotenv(path: Path) -> dict[str, str] | None:
    """Parse a .env file, or return None when it does not exist.

    Raises:
        ConfigError: unreadable, or lines that are not assignments.
    """
    text = read_text(path)
    return None if text is None else parse_dotenv(text, file=str(path))


def read_global(path: Path, *, required: bool, home: Path) -> GlobalSource:
    """Read the global config file: TOML, an `mcpServers` JSON file, or the original
    Assern layout's `config.yaml` (by its suffix).

    A YAML file is converted (see yaml_layout.py); an `mcp.json` beside it, which held
    the original layout's servers, is included.

    Args:
        path: The file.
        required: A missing file is an error (`--config`) rather than an empty config.
        home: What `~` means in `include` paths.

    Raises:
        ConfigError: for this file or an included one, listing all of that file's problems.
    """
    text = read_text(path)
    if text is None:
        if required:
            raise ConfigError(str(path), ("file not found",))
        return GlobalSource()
    if path.suffix.lower() == ".json":
        servers = _json_layers(path, text, level="global")
        return GlobalSource(file=path, servers=servers, files=(path,))
    notes: tuple[str, ...] = ()
    if path.suffix.lower() in YAML_SUFFIXES:
        converted = convert_global(parse_yaml(text, file=str(path)), file=str(path))
        document, notes = converted.document, converted.notes
        if "include" not in document and (path.parent / ORIGINAL_SERVERS_FILE).is_file():
            document["include"] = [ORIGINAL_SERVERS_FILE]
    else:
        document = parse_toml(text, file=str(path))
    model = structure(document, ConfigFile, file=str(path))
    included, included_files, problems = _read_includes(model.include, path, "global", home)
    problems += model.problems(included=included.keys())
    if problems:
        raise ConfigError(str(path), tuple(problems))
    own = _toml_layers(model.servers, path, layer="global-config", level="global", base=path.parent)
    return GlobalSource(
        file=path,
        settings=model.settings,
        servers=_stack(included, own),
        projects=model.projects,
        profiles=model.profiles,
        groups=model.groups,
        middleware=model.middleware,
        listen=model.listen,
        files=(path, *included_files),
        notes=notes,
    )


def read_local(root: Path, *, home: Path) -> LocalSource:
    """Read a project's `.assern/config.toml` (absent is fine: then only its .env counts).

    A relative `cwd` in the local file is relative to the project root.

    Raises:
        ConfigError: for this file or an included one, listing all of that file's problems.
    """
    path = root / LOCAL_DIR / "config.toml"
    text = read_text(path)
    if text is None:
        return LocalSource(root=root)
    model = loads_toml(text, LocalConfigFile, file=str(path))
    included, included_files, problems = _read_includes(model.include, path, "local", home)
    problems += [
        problem
        for name, server in model.servers.items()
        for problem in server_problems(name, server, defines=False, path=("servers",))
    ]
    if model.middleware:
        problems.append(
            at(
                "a project's config file cannot configure middleware (it runs Python inside "
                "assern): put [[middleware]] in the global config file",
                ("middleware",),
            )
        )
    if model.listen is not None:
        problems.append(
            at(
                "a project's config file cannot configure [listen] (it opens a network port): "
                "put [listen] in the global config file",
                ("listen",),
            )
        )
    if problems:
        raise ConfigError(str(path), tuple(problems))
    own = _toml_layers(model.servers, path, layer="local-config", level="local", base=root)
    return LocalSource(
        root=root,
        file=path,
        project=model.project,
        settings=model.settings,
        servers=_stack(included, own),
        profiles=model.profiles,
        groups=model.groups,
        files=(path, *included_files),
    )


def _read_includes(
    includes: Sequence[str], including: Path, level: Level, home: Path
) -> tuple[dict[str, list[ServerLayer]], list[Path], list[str]]:
    """Read the `include` list of a file: (servers, files read, problems of the includer)."""
    servers: dict[str, list[ServerLayer]] = {}
    files: list[Path] = []
    problems: list[str] = []
    for index, raw in enumerate(includes):
        path = including.parent / expand_user(raw, home)
        if not raw.strip() or path.is_dir():
            problems.append(
                at(f"expected the path of an mcpServers JSON file, got {show(raw)}", ("include", index))
            )
            continue
        text = read_text(path)
        if text is None:
            problems.append(at(f"included file not found: {path}", ("include", index)))
            continue
        files.append(path)
        for name, layers in _json_layers(path, text, level=level).items():
            servers.setdefault(name, []).extend(layers)
    return servers, files, problems


def _json_layers(path: Path, text: str, *, level: Level) -> dict[str, tuple[ServerLayer, ...]]:
    servers = ServerConfig.from_mcp_servers_json(text, file=str(path))
    return {
        name: (
            ServerLayer(
                config=config,
                origin=Origin(
                    layer="mcp-json",
                    level=level,
                    file=path,
                    prefix=("mcpServers", name),
                    base_dir=path.parent,
                ),
            ),
        )
        for name, config in servers.items()
    }


def _toml_layers(
    servers: Mapping[str, ServerConfig], path: Path, *, layer: Layer, level: Level, base: Path
) -> dict[str, tuple[ServerLayer, ...]]:
    return {
        name: (
            ServerLayer(
                config=config,
                origin=Origin(layer=layer, level=level, file=path, prefix=("servers", name), base_dir=base),
            ),
        )
        for name, config in servers.items()
    }


def _stack(*sources: Mapping[str, Sequence[ServerLayer]]) -> dict[str, tuple[ServerLayer, ...]]:
    """Concatenate server tables per name, keeping first-declaration order of names."""
    stacks: dict[str, tuple[ServerLayer, ...]] = {}
    for source in sources:
        for name, layers in source.items():
            stacks[name] = (*stacks.get(name, ()), *layers)
    return stacks
