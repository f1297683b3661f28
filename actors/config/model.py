"""The config files as written: frozen attrs classes that cattrs structures.

A file is one layer, so every field of a server, project or settings table is optional:
None means "this file does not say", and a higher layer's value wins over a lower one's
only where it says something. Defaults are applied once, when the layers are resolved
into a `ServerSpec` (see resolve.py).

This module deliberately has no `from __future__ import annotations`: cattrs reads the
field types at runtime.
"""

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

import attrs

from assern.actors.config.env import MergeMode
from assern.actors.config.keypath import KeyPath, at
from assern.actors.config.listen import BindError, HttpAuth, parse_bind
from assern.actors.config.middleware import MiddlewareError, make_middleware
from assern.actors.config.spec import (
    ConfigError,
    DescriptionFormat,
    Exposure,
    LearnMode,
    Naming,
    SemanticMode,
    StartMode,
    Transport,
    ValidateMode,
)
from assern.actors.config.structure import (
    CONVERTER,
    Invalid,
    expected,
    register_union,
    show,
    structure,
)

RestartType = Literal["permanent", "transient", "temporary"]
#: The servers assern itself provides (`builtin = "context"`: its context server).
Builtin = Literal["context"]
McpServerType = Literal["stdio", "sse", "http", "streamable-http"]
#: The transport each `mcpServers` "type" means.
_MCP_TRANSPORTS: dict[McpServerType, Transport] = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
}


# -- validators: callable classes with a readable repr, raising messages meant for users --


#: The longest time any setting may name: a week (every timeout, window and backoff).
MAX_SECONDS = 7 * 24 * 3600.0
#: The most restarts a window may allow.
MAX_RESTARTS = 10_000
#: The shortest `max_name_length`: a shortened name keeps at least 7 characters of its
#: head, then `_` and an 8-character hash (naming.py), so it stays readable and distinct.
MIN_NAME_LENGTH = 16
#: The largest tool count or token budget a setting may name.
MAX_COUNT = 100_000_000


@attrs.frozen(repr=False)
class _AtLeast:
    """Optional finite number `>= bound` (or `> bound` when not `inclusive`), at most `most`."""

    bound: float
    noun: str = "a number"
    inclusive: bool = True
    most: float = MAX_SECONDS

    # `Any`: one validator serves int and float fields alike (attrs types it by its field).
    def __call__(self, _instance: object, _attribute: object, value: Any) -> None:
        if value is None:
            return
        if not math.isfinite(value):
            raise Invalid(f"expected {self.noun} (a finite number), got {show(value)}")
        if value < self.bound or (not self.inclusive and value == self.bound):
            relation = ">=" if self.inclusive else ">"
            raise Invalid(f"expected {self.noun} {relation} {self.bound:g}, got {show(value)}")
        if value > self.most:
            raise Invalid(f"expected {self.noun} <= {self.most:g}, got {show(value)}")

    def __repr__(self) -> str:
        return f"<validator {'>=' if self.inclusive else '>'} {self.bound:g}, <= {self.most:g}>"


def _positive(noun: str = "a number") -> _AtLeast:
    return _AtLeast(0, noun, inclusive=False)


@attrs.frozen(repr=False)
class _EnvNames:
    """Keys of an env table must be usable as environment variable names."""

    def __call__(self, _instance: object, _attribute: object, value: Mapping[str, str] | None) -> None:
        for key in value or ():
            if not key or "=" in key or "\0" in key:
                raise Invalid(f"expected environment variable names, got {key!r}")

    def __repr__(self) -> str:
        return "<validator env names>"


_PROTOCOL_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")


@attrs.frozen(repr=False)
class _Protocol:
    """A protocol choice: legacy, auto, or a version pin such as 2026-07-28."""

    def __call__(self, _instance: object, _attribute: object, value: str | None) -> None:
        if value is None or value in ("legacy", "auto") or _PROTOCOL_VERSION.fullmatch(value):
            return
        raise Invalid(
            f"expected 'legacy', 'auto' or a protocol version such as '2026-07-28', got {show(value)}"
        )

    def __repr__(self) -> str:
        return "<validator protocol>"


@attrs.frozen(repr=False)
class _Directories:
    """Project directory patterns must be absolute or start with `~`."""

    def __call__(self, _instance: object, _attribute: object, value: tuple[str, ...]) -> None:
        for pattern in value:
            if not pattern.startswith(("/", "~")):
                raise Invalid(f"expected absolute paths or paths starting with '~', got {pattern!r}")

    def __repr__(self) -> str:
        return "<validator directories>"


@attrs.frozen(repr=False)
class _BindAddress:
    """`[HOST:]PORT` of the HTTP front."""

    def __call__(self, _instance: object, _attribute: object, value: str | None) -> None:
        if value is None:
            return
        try:
            parse_bind(value)
        except BindError as exc:
            raise Invalid(str(exc)) from None

    def __repr__(self) -> str:
        return "<validator [HOST:]PORT>"


# -- the tables ---------------------------------------------------------------------------


def _weight() -> Any:
    return attrs.field(default=None, validator=_AtLeast(0, "a weight", most=100))


@attrs.frozen(kw_only=True)
class FieldWeightsConfig:
    """`[settings.search] fields = {...}`: each field's weight (spec.SearchSettings)."""

    name: float | None = _weight()
    description: float | None = _weight()
    parameters: float | None = _weight()
    server: float | None = _weight()
    instructions: float | None = _weight()


@attrs.frozen(kw_only=True)
class SearchConfig:
    """`[settings.search]` as one file writes it."""

    semantic: SemanticMode | None = None
    learn: LearnMode | None = None
    fields: FieldWeightsConfig | None = None


@attrs.frozen(kw_only=True)
class SettingsConfig:
    """`[settings]` as one file writes it."""

    naming: Naming | None = None
    max_name_length: int | None = attrs.field(
        default=None, validator=_AtLeast(MIN_NAME_LENGTH, "an integer", most=4096)
    )
    initialize_wait: float | None = attrs.field(default=None, validator=_AtLeast(0, "seconds"))
    #: seconds without a call before a backend goes dormant (0: never); servers may override
    idle_timeout: float | None = attrs.field(default=None, validator=_AtLeast(0, "seconds"))
    exposure: Exposure | None = None
    pinned: tuple[str, ...] | None = None
    max_tools: int | None = attrs.field(default=None, validator=_AtLeast(0, "an integer", most=MAX_COUNT))
    max_list_tokens: int | None = attrs.field(
        default=None, validator=_AtLeast(1, "an integer", most=MAX_COUNT)
    )
    search: SearchConfig | None = None
    description_format: DescriptionFormat | None = None
    deny: tuple[str, ...] | None = None
    read_only: bool | None = None
    validate: ValidateMode | None = None
    confirm: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class ProfileConfig:
    """One `[profiles.NAME]` table as one file writes it (spec.Profile says what each
    field means); a local file's table for the same name overrides field by field."""

    match: tuple[str, ...] | None = None
    exposure: Exposure | None = None
    pinned: tuple[str, ...] | None = None
    naming: Naming | None = None
    max_name_length: int | None = attrs.field(
        default=None, validator=_AtLeast(MIN_NAME_LENGTH, "an integer", most=4096)
    )
    servers: tuple[str, ...] | None = None
    exclude_servers: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] | None = None
    max_tools: int | None = attrs.field(default=None, validator=_AtLeast(0, "an integer", most=MAX_COUNT))
    max_list_tokens: int | None = attrs.field(
        default=None, validator=_AtLeast(1, "an integer", most=MAX_COUNT)
    )
    description_format: DescriptionFormat | None = None
    deny: tuple[str, ...] | None = None
    read_only: bool | None = None
    validate: ValidateMode | None = None
    confirm: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class ListenConfig:
    """`[listen]`: the HTTP front (listen.ListenSpec says what each field means)."""

    http: str | None = attrs.field(default=None, validator=_BindAddress())
    auth: HttpAuth | None = None
    tokens_file: str | None = None
    allowed_origins: tuple[str, ...] | None = None
    allowed_hosts: tuple[str, ...] | None = None
    certfile: str | None = None
    keyfile: str | None = None
    max_body_bytes: int | None = attrs.field(
        default=None, validator=_AtLeast(1024, "a byte count", most=1 << 30)
    )
    max_header_bytes: int | None = attrs.field(
        default=None, validator=_AtLeast(1024, "a byte count", most=1 << 24)
    )
    max_sessions: int | None = attrs.field(default=None, validator=_AtLeast(1, "an integer", most=MAX_COUNT))
    max_sessions_per_token: int | None = attrs.field(
        default=None, validator=_AtLeast(1, "an integer", most=MAX_COUNT)
    )
    session_idle_timeout: float | None = attrs.field(default=None, validator=_positive("seconds"))
    replay_events: int | None = attrs.field(default=None, validator=_AtLeast(0, "an integer", most=100_000))
    resume_grace: float | None = attrs.field(default=None, validator=_AtLeast(0, "seconds"))
    legacy_sse: bool | None = None
    graceful_timeout: float | None = attrs.field(default=None, validator=_AtLeast(0, "seconds"))


@attrs.frozen(kw_only=True)
class GroupConfig:
    """One `[groups.NAME]` table (spec.Group)."""

    tools: tuple[str, ...]
    description: str | None = None


@attrs.frozen(kw_only=True)
class MiddlewareConfig:
    """One `[[middleware]]` entry (spec.MiddlewareSpec)."""

    use: str
    name: str | None = None
    servers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    options: Mapping[str, Any] = attrs.field(factory=dict)
    asyncio: bool = False


@attrs.frozen(kw_only=True)
class McpServerEntry:
    """One entry of an `mcpServers` JSON file (Claude Desktop, Cursor, Claude Code, cllm-mcp).

    `type` is Claude Code's transport word ("http" means streamable HTTP).
    """

    command: str | None = None
    args: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = attrs.field(default=None, repr=False, validator=_EnvNames())
    url: str | None = None
    headers: Mapping[str, str] | None = attrs.field(default=None, repr=False)
    cwd: str | None = None
    type: McpServerType | None = None
    disabled: bool | None = None


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One `[servers.NAME]` table (or a project's or local file's override of it).

    Every field is None when the table leaves it out. `env` and `headers` never appear in
    a repr.
    """

    command: str | None = None
    args: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = attrs.field(default=None, repr=False, validator=_EnvNames())
    cwd: str | None = None
    url: str | None = None
    transport: Transport | None = None
    headers: Mapping[str, str] | None = attrs.field(default=None, repr=False)
    merge_mode: MergeMode | None = None
    allowed: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    read_only: bool | None = None
    validate: ValidateMode | None = None
    confirm: tuple[str, ...] | None = None
    restart: RestartType | None = None
    max_restarts: int | None = attrs.field(
        default=None, validator=_AtLeast(0, "an integer", most=MAX_RESTARTS)
    )
    restart_window: float | None = attrs.field(default=None, validator=_positive())
    backoff_initial: float | None = attrs.field(default=None, validator=_AtLeast(0))
    backoff_max: float | None = attrs.field(default=None, validator=_AtLeast(0))
    start: StartMode | None = None
    timeout: float | None = attrs.field(default=None, validator=_positive())
    startup_timeout: float | None = attrs.field(default=None, validator=_positive())
    idle_timeout: float | None = attrs.field(default=None, validator=_AtLeast(0, "seconds"))
    #: never put to sleep when idle (a browser, a logged-in session)
    keep_alive: bool | None = None
    protocol: str | None = attrs.field(default=None, validator=_Protocol())
    disabled: bool | None = None
    #: a server assern provides itself, instead of `command` or `url`
    builtin: Builtin | None = None
    #: the context server's folder (default: the project's root, else the current folder)
    root: str | None = None
    #: more files the context server leaves out (gitignore syntax)
    exclude: tuple[str, ...] | None = None
    #: larger files are not indexed by the context server (bytes)
    max_file_size: int | None = attrs.field(default=None, validator=_AtLeast(1, "a byte count", most=1 << 30))
    #: more secret files, never indexed nor returned (gitignore syntax)
    secrets: tuple[str, ...] | None = None

    @classmethod
    def from_mcp_server(cls, entry: McpServerEntry) -> "ServerConfig":
        """Translate one `mcpServers` entry into our server table."""
        transport = _MCP_TRANSPORTS[entry.type] if entry.type is not None else None
        return cls(
            command=entry.command,
            args=entry.args,
            env=entry.env,
            url=entry.url,
            headers=entry.headers,
            cwd=entry.cwd,
            transport=transport,
            disabled=entry.disabled,
        )

    @classmethod
    def from_mcp_servers_json(cls, text: str, *, file: str) -> dict[str, "ServerConfig"]:
        """Read an `mcpServers` JSON document (Claude Desktop / Cursor / cllm-mcp format).

        `{"mcpServers": {"NAME": {"command", "args", "env", "url", "headers"}}}`; VS Code's
        top-level `"servers"` is accepted too. Other top-level keys, and keys of an entry
        that assern does not use (a client's `autoApprove`, say), are ignored so that
        existing client configs work unchanged.

        Args:
            text: The JSON text.
            file: Its file name, for errors.

        Returns:
            The servers by name, in file order.

        Raises:
            ConfigError: invalid JSON (with line and column), a wrongly typed value, or an
                entry with neither (or both) `command` and `url`; every problem is listed.
        """
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON: {exc.msg} (at line {exc.lineno}, column {exc.colno})"
            raise ConfigError(file, (problem,)) from exc
        key = "mcpServers"
        if isinstance(document, Mapping) and key not in document and "servers" in document:
            key = "servers"
        if not isinstance(document, Mapping) or key not in document:
            raise ConfigError(file, ('expected a JSON object with an "mcpServers" object',))
        raw = document[key]
        known = {field.name for field in attrs.fields(McpServerEntry)}
        if isinstance(raw, Mapping):
            raw = {
                name: {k: v for k, v in entry.items() if k in known} if isinstance(entry, Mapping) else entry
                for name, entry in raw.items()
            }
        # `type[T]` cannot name a generic alias such as Mapping[str, X] (PEP 747 would).
        entries = structure(raw, Mapping[str, McpServerEntry], file=file, prefix=(key,))  # type: ignore[type-abstract]
        servers = {name: cls.from_mcp_server(entry) for name, entry in entries.items()}
        problems = [
            problem
            for name, server in servers.items()
            for problem in server_problems(name, server, defines=True, path=(key,))
        ]
        if problems:
            raise ConfigError(file, tuple(problems))
        return servers

    def problems(self, *, defines: bool) -> list[tuple[KeyPath, str]]:
        """Cross-field rules of one server table.

        Args:
            defines: The table defines the server (no lower layer does), so it must
                say how to reach it; False for an override of an existing server.

        Returns:
            (key path below the server's table, message) pairs; empty when all is well.
        """
        problems: list[tuple[KeyPath, str]] = []
        if self.builtin is not None and (self.command is not None or self.url is not None):
            other = "command" if self.command is not None else "url"
            problems.append(((other,), f"a builtin server takes no `{other}`: `builtin` says what runs"))
        elif self.command is not None and self.url is not None:
            problems.append(((), "a server takes either `command` or `url`, not both"))
        elif defines and self.command is None and self.url is None and self.builtin is None:
            problems.append(((), "a server needs either `command` or `url`"))
        if self.transport == "stdio" and self.url is not None and self.command is None:
            problems.append((("transport",), "transport 'stdio' needs `command`, not `url`"))
        if self.transport in ("sse", "streamable-http") and self.command is not None:
            problems.append((("transport",), f"transport {self.transport!r} needs `url`, not `command`"))
        return problems


def server_name_problem(name: str) -> str | None:
    """What is wrong with a server's name, if anything.

    A name is any text with at least one ASCII letter or digit, without `/` (resource
    URIs carry the name as a path segment) and without control characters. In tool and
    prompt names every character other than a letter, a digit or `_` becomes `_`
    (naming.py), so `my-server` and `my server` both give the prefix `my_server`.
    """
    if not any(ch.isascii() and ch.isalnum() for ch in name):
        return f"expected a server name with at least one letter or digit, got {show(name)}"
    if "/" in name or not name.isprintable():
        return f"expected a server name without '/' or control characters, got {show(name)}"
    return None


def server_problems(name: str, server: ServerConfig, *, defines: bool, path: KeyPath) -> list[str]:
    """Every "problem @ key.path" line of one server table at `path + (name,)`."""
    found = [at(message, (*path, name, *suffix)) for suffix, message in server.problems(defines=defines)]
    naming = server_name_problem(name)
    return [at(naming, (*path, name)), *found] if naming is not None else found


#: `servers` of a project: a list of global server names to enable, or override tables.
ProjectServers = tuple[str, ...] | Mapping[str, ServerConfig]


@attrs.frozen(kw_only=True)
class ProjectConfig:
    """`[projects.NAME]` in the global config.

    `servers` is either a list of the global servers the project enables, or a table of
    `[projects.NAME.servers.X]` overrides and new servers (then every global server stays
    enabled; an override with `disabled = true` drops one). TOML cannot hold both under
    one key.
    """

    directories: tuple[str, ...] = attrs.field(default=(), validator=_Directories())
    env: Mapping[str, str] | None = attrs.field(default=None, repr=False, validator=_EnvNames())
    servers: ProjectServers | None = None

    @property
    def enabled(self) -> tuple[str, ...] | None:
        """The global servers this project enables, or None for all of them."""
        return self.servers if isinstance(self.servers, tuple) else None

    @property
    def overrides(self) -> Mapping[str, ServerConfig]:
        """The project's server tables: overrides of global servers and new servers."""
        return self.servers if isinstance(self.servers, Mapping) else {}


def _structure_project_servers(value: object, _: object) -> Any:
    if isinstance(value, list | tuple):
        return CONVERTER.structure(value, tuple[str, ...])
    if isinstance(value, Mapping):
        # `type[T]` cannot name a generic alias such as Mapping[str, X] (PEP 747 would).
        return CONVERTER.structure(value, Mapping[str, ServerConfig])  # type: ignore[type-abstract]
    raise expected("a list of server names or a table of servers", value)


register_union(ProjectServers, _structure_project_servers)


@attrs.frozen(kw_only=True)
class ConfigFile:
    """The global config file (`$ASSERN_HOME/config.toml` or `--config`)."""

    settings: SettingsConfig | None = None
    servers: Mapping[str, ServerConfig] = attrs.field(factory=dict)
    projects: Mapping[str, ProjectConfig] = attrs.field(factory=dict)
    profiles: Mapping[str, ProfileConfig] = attrs.field(factory=dict)
    groups: Mapping[str, GroupConfig] = attrs.field(factory=dict)
    middleware: tuple[MiddlewareConfig, ...] = ()
    listen: ListenConfig | None = None
    include: tuple[str, ...] = ()

    def problems(self, *, included: Collection[str]) -> list[str]:
        """Cross-table rules of the file: "problem @ key.path" lines.

        Args:
            included: Names of servers defined by the file's included JSON files (a
                `[servers.X]` table for one of them is an override, not a definition).
        """
        problems = [
            problem
            for name, server in self.servers.items()
            for problem in server_problems(name, server, defines=name not in included, path=("servers",))
        ]
        known = {*included, *self.servers}
        for project_name, project in self.projects.items():
            path: KeyPath = ("projects", project_name, "servers")
            for index, name in enumerate(project.enabled or ()):
                if name not in known:
                    listing = ", ".join(repr(n) for n in sorted(known)) or "none"
                    problems.append(at(f"unknown server {name!r} (known servers: {listing})", (*path, index)))
            for name, server in project.overrides.items():
                problems += server_problems(name, server, defines=name not in known, path=path)
        return problems + middleware_problems(self.middleware)


def middleware_name(entry: MiddlewareConfig) -> str:
    """An entry's name: its own, else what its `use` says."""
    return entry.name or entry.use


def middleware_problems(entries: Sequence[MiddlewareConfig]) -> list[str]:
    """What is wrong with each `[[middleware]]` entry: "problem @ key.path" lines.

    Each factory is imported and given its options here, so a typo in `use` or a
    refused option is an error of the file (naming the entry) when it is loaded, not a
    failure of the first call.
    """
    problems = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        name = middleware_name(entry)
        if name in seen:
            problems.append(
                at(
                    f"a second middleware named {name!r}: give each a distinct `name`",
                    ("middleware", index, "name"),
                )
            )
        seen.add(name)
        try:
            make_middleware(entry.use, entry.options)
        except MiddlewareError as exc:
            problem = str(exc) if exc.key == "use" else f"{entry.use!r} {exc}"
            problems.append(at(problem, ("middleware", index, exc.key)))
    return problems


@attrs.frozen(kw_only=True)
class LocalConfigFile:
    """A project's `.assern/config.toml`: the global file's tables plus `project`."""

    project: str | None = None
    settings: SettingsConfig | None = None
    servers: Mapping[str, ServerConfig] = attrs.field(factory=dict)
    profiles: Mapping[str, ProfileConfig] = attrs.field(factory=dict)
    groups: Mapping[str, GroupConfig] = attrs.field(factory=dict)
    #: refused (read_local): a project's file may not name Python for assern to import
    middleware: tuple[MiddlewareConfig, ...] = ()
    #: refused (read_local): a project's file may not open a network port
    listen: ListenConfig | None = None
    include: tuple[str, ...] = ()
