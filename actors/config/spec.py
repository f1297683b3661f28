"""What the configuration layer hands to the rest of assern: resolved, frozen values.

Everything here is already merged, expanded and checked. The backend actor runs a
`ServerSpec` as it is; nothing downstream reads a config file or the environment again.
Secrets live in `env` and `headers`, which never appear in a repr.
"""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import attrs

from assern.actors.config.listen import ListenSpec
from assern.actors.config.trust import TrustReport
from assern.supervisor.spec import RestartPolicy

#: Where a value came from, lowest layer first (DESIGN.md §3). `mcp-json` is a server read
#: from an `mcpServers` JSON file (included, or given as the config file itself); `cli`
#: is reserved for values given on the command line.
Layer = Literal[
    "system-env",
    "global-env",
    "global-config",
    "project",
    "local-env",
    "local-config",
    "mcp-json",
    "cli",
]

Transport = Literal["stdio", "streamable-http", "sse"]
StartMode = Literal["eager", "lazy"]
Naming = Literal["prefix", "hybrid"]
Exposure = Literal["all", "search", "grouped"]
SemanticMode = Literal["auto", "off"]
LearnMode = Literal["on", "off"]
#: How a call's arguments are checked against the tool's inputSchema before it leaves
#: assern (and its structuredContent against the outputSchema when it comes back).
ValidateMode = Literal["off", "warn", "strict"]
#: How a grouped tool's description lists its actions.
DescriptionFormat = Literal["text", "toon"]
#: The word in `confirm` that means every tool that may change the world.
DESTRUCTIVE = "destructive"
#: `[settings] idle_timeout` when no file sets it: ten minutes without a call.
DEFAULT_IDLE_TIMEOUT = 600.0


def dormancy(own: float | None, keep_alive: bool, default: float) -> float | None:
    """A backend's effective idle timeout: its own (None: not set) else the settings'
    `default`; None (never dormant) for 0 or `keep_alive`."""
    if keep_alive:
        return None
    seconds = default if own is None else own
    return None if seconds <= 0 else float(seconds)


@attrs.frozen(kw_only=True)
class Group:
    """One `[groups.NAME]`: a grouped tool gathering tools of several servers.

    Attributes:
        name: The grouped tool's name.
        tools: Globs over exposed names or `SERVER_TOOL`; a tool may be in several groups.
        description: What the group is for (the first line of the tool's description).
    """

    name: str
    tools: tuple[str, ...]
    description: str | None = None


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class MiddlewareSpec:
    """One `[[middleware]]` entry: a middleware around the calls of the tools it takes.

    Attributes:
        name: How errors, logs and `assernctl config explain` name it (default: `use`).
        use: A shipped middleware ("rate_limit", "redact", "audit") or
            "package.module:factory".
        servers: Globs over server names it wraps (empty: every server).
        tools: Globs over tool names (exposed, `SERVER_TOOL` or the server's own) it
            wraps (empty: every tool).
        options: The table handed to its factory.
        asyncio: It is an asyncio coroutine function, run on the process's asyncio loop.
    """

    name: str
    use: str
    # tuples whatever was given: an entry is a dict key of the middlewares it built
    servers: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    tools: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    options: Mapping[str, object] = attrs.field(factory=dict, hash=False)
    asyncio: bool = False


@attrs.frozen(kw_only=True)
class CallRules:
    """What may be listed and called, and how calls are checked: one layer's word
    (`[settings]`, a `[profiles.NAME]` or a `[servers.NAME]`).

    Attributes:
        deny: Globs of tools neither listed nor callable (over the exposed name,
            `SERVER_TOOL` and the server's own name).
        read_only: Only tools annotated `readOnlyHint: true` are listed and callable.
        validate: How arguments are checked (None: this layer does not say).
        confirm: Globs of tools (or the word "destructive") whose calls the calling
            client is asked to allow first, through MCP elicitation.
    """

    deny: tuple[str, ...] = ()
    read_only: bool = False
    validate: ValidateMode | None = None
    confirm: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SearchSettings:
    """`[settings.search]`: how search_tools ranks (the defaults need no tuning).

    Attributes:
        semantic: "auto" ranks by meaning too when the `assern[semantic]` extra is
            installed; "off" ranks by words only.
        learn: "on" counts the calls of the tools a search answered (names and counts
            only, in `$ASSERN_HOME/search-use.json`) and lifts often-called tools a little
            in later searches; "off" neither counts nor lifts.
        name, description, parameters, server, instructions: How much a word counts in
            each field of a tool (its own name, its description, its parameters' names
            and descriptions, its server's name, its server's instructions).
    """

    semantic: SemanticMode = "auto"
    learn: LearnMode = "on"
    name: float = 3.0
    description: float = 1.0
    parameters: float = 0.8
    server: float = 1.5
    instructions: float = 0.2

    @property
    def weights(self) -> tuple[float, float, float, float, float]:
        return (self.name, self.description, self.parameters, self.server, self.instructions)


@attrs.frozen(kw_only=True)
class Provenance:
    """The layer and file that supplied a value.

    Attributes:
        layer: One of the `Layer` words, e.g. "global-env" or "local-config".
        file: The file that holds the value, or None for the process environment.
    """

    layer: Layer
    file: str | None


@attrs.frozen(kw_only=True)
class Profile:
    """One `[profiles.NAME]`: the view of the catalog one kind of client gets.

    Every field left unset (None) takes the `[settings]` value; `servers`, `tools` and
    their exclusions filter what the settings' view shows.

    Attributes:
        name: The table's name (`--profile NAME`, `ASSERN_PROFILE`).
        match: Globs over a client's `clientInfo.name`; the first profile that matches
            serves the client.
        servers: The only servers shown (None: every server).
        exclude_servers: Servers never shown.
        tools: Globs over exposed tool names (or `SERVER_TOOL`): the only tools shown.
        exclude_tools: Globs of tools never shown.
        max_tools: More tools than this in the view serves it in search exposure.
        max_list_tokens: A tools/list longer than this many (estimated) tokens serves the
            view in search exposure.
    """

    name: str
    match: tuple[str, ...] = ()
    exposure: Exposure | None = None
    pinned: tuple[str, ...] | None = None
    naming: Naming | None = None
    max_name_length: int | None = None
    servers: tuple[str, ...] | None = None
    exclude_servers: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    max_tools: int | None = None
    max_list_tokens: int | None = None
    description_format: DescriptionFormat | None = None
    #: the profile's deny, read_only, validate and confirm (added to the settings')
    rules: CallRules = attrs.field(factory=CallRules)


@attrs.frozen(kw_only=True)
class Settings:
    """Aggregator-wide settings (`[settings]`, the local file's winning over the global's).

    Attributes:
        naming: "prefix" always exposes `{server}_{tool}`; "hybrid" keeps a natural name
            when it is unique.
        max_name_length: Longest exposed name; longer ones are shortened deterministically.
        idle_timeout: Seconds without a call before a backend goes dormant, for servers
            that set none of their own (0: never).
        initialize_wait: Seconds a client's `initialize` may wait for backends whose
            capabilities are not known yet (neither ready nor remembered from an earlier
            run). 0 answers at once with what is known.
        exposure: "all" lists every tool; "search" lists the meta-tools (search_tools,
            describe_tools, call_tool) and the pinned tools only.
        pinned: Globs over exposed tool names listed in full beside the meta-tools.
        max_tools: More tools than this serves the catalog in search exposure (None: no
            limit).
        max_list_tokens: A tools/list longer than this many (estimated) tokens serves the
            catalog in search exposure (None: no limit).
        profiles: The `[profiles.*]` tables, in declaration order (global file first).
        search: `[settings.search]`, how search_tools ranks.
        description_format: "text" or "toon" for a grouped tool's action table
            ("toon" is used only where it is shorter).
        rules: `deny`, `read_only`, `validate` and `confirm` of `[settings]`.
        groups: The `[groups.*]` tables: with any, grouped exposure shows these groups
            instead of one tool per server.
        middleware: The `[[middleware]]` entries, outermost first.
    """

    naming: Naming = "prefix"
    max_name_length: int = 64
    initialize_wait: float = 0.0
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    exposure: Exposure = "all"
    pinned: tuple[str, ...] = ()
    max_tools: int | None = None
    max_list_tokens: int | None = None
    profiles: tuple[Profile, ...] = ()
    search: SearchSettings = attrs.field(factory=SearchSettings)
    description_format: DescriptionFormat = "text"
    rules: CallRules = attrs.field(factory=CallRules)
    groups: tuple[Group, ...] = ()
    middleware: tuple[MiddlewareSpec, ...] = ()

    def profile(self, name: str | None) -> Profile | None:
        """The profile called `name`, if there is one."""
        return next((p for p in self.profiles if p.name == name), None)

    def profile_problem(self, name: str | None) -> str | None:
        """What is wrong with serving the view of profile `name` (None: the settings')."""
        if name is None or self.profile(name) is not None:
            return None
        names = ", ".join(p.name for p in self.profiles) or "none configured"
        return f"unknown profile {name!r} (profiles: {names})"


@attrs.frozen(kw_only=True)
class ServerSpec:
    """One backend, fully resolved: exactly what the backend actor runs.

    Attributes:
        name: The server's name as configured (the key of `[servers.NAME]`).
        transport: "stdio" (a child process), "streamable-http" or "sse" (a remote URL).
        command: The program to start, for stdio.
        args: Its arguments.
        env: The complete environment of the child process: the system environment, the
            .env files and the server's and project's env after merging. Never logged.
        cwd: Absolute working directory of the child, or None to inherit assern's.
        url: The endpoint, for the HTTP transports.
        headers: HTTP headers sent to a remote backend. Never logged.
        allowed: fnmatch globs over the backend's original tool names; None exposes all.
        rules: The server's deny, read_only, validate and confirm.
        policy: How the backend is restarted (OTP restart type, intensity, backoff).
        start: "eager" starts with assern; "lazy" on first use.
        timeout: Seconds allowed for one call (progress resets them; the backend's wait
            on a client's answer does not count).
        startup_timeout: Seconds allowed for the backend to start and initialize.
        idle_timeout: Seconds without calls after which the backend goes dormant (stopped,
            its listing kept; the next call starts it again); None keeps it running. The
            server's own `idle_timeout`, else `[settings] idle_timeout`; 0 in either, or
            `keep_alive = true`, gives None.
        keep_alive: The server opted out of dormancy (`keep_alive = true`).
        protocol: "legacy" (initialize handshake), "auto" (probe, then fall back) or a
            protocol version pin such as "2026-07-28".
        env_keys_from: For every env key supplied by a config layer or .env file (not by
            the system environment), where it came from.
    """

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, repr=False, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False, hash=False)
    allowed: tuple[str, ...] | None = None
    rules: CallRules = attrs.field(factory=CallRules)
    policy: RestartPolicy = attrs.field(factory=RestartPolicy)
    start: StartMode = "eager"
    timeout: float = 60.0
    startup_timeout: float = 30.0
    idle_timeout: float | None = None
    keep_alive: bool = False
    protocol: str = "legacy"
    env_keys_from: Mapping[str, Provenance] = attrs.field(factory=dict, repr=False, hash=False)

    def __attrs_post_init__(self) -> None:
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"server {self.name!r}: the stdio transport needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"server {self.name!r}: the {self.transport} transport needs a url")


@attrs.frozen(kw_only=True)
class ResolvedConfig:
    """The whole configuration in effect for one directory and project.

    Attributes:
        settings: The merged `[settings]`.
        servers: The enabled servers by name, in declaration order (disabled ones and
            those a project leaves out are absent).
        project: The active project's name, or None when no project applies.
        files: Every existing file that contributed (config files, .env files, included
            JSON files), for hot reload to watch.
        warnings: Things worth telling the user that do not stop assern.
        potential_files: Files that do not exist but would contribute if they were
            created (the global config and .env, the local `.assern/config.toml` and
            `.env`), so hot reload notices them appearing.
        listen: The HTTP front (`[listen]`).
        trust: Which folders' own files apply and which wait for `assernctl trust`;
            its `watched` files (the store, the waiting files) reload when they change.
        cwd: The folder it was resolved from (where the client started), when known.
        local_root: The nearest folder at or above `cwd` holding `.assern/` (the
            project root), if any.
    """

    settings: Settings
    servers: Mapping[str, ServerSpec]
    project: str | None
    files: tuple[Path, ...]
    warnings: tuple[str, ...] = ()
    potential_files: tuple[Path, ...] = ()
    listen: ListenSpec = attrs.field(factory=ListenSpec)
    trust: TrustReport = attrs.field(factory=TrustReport)
    cwd: Path | None = None
    local_root: Path | None = None


@attrs.frozen(kw_only=True)
class DesiredSet:
    """The config actor's message to the backends supervisor: the complete set of backends
    that should run, in configuration order. The root wiring connects the two."""

    specs: Mapping[str, ServerSpec]


class ConfigError(Exception):
    """A configuration file (or the project choice) is wrong; nothing was loaded.

    A plain `Exception`, never an `ExceptionGroup`, so it travels through trio nurseries
    and `except` clauses like any other error. It carries every problem found in one
    file, not just the first.

    Attributes:
        file: The file at fault, or None when no single file is (an unknown --project).
        problems: One line per problem, each "WHAT @ key.path" when a key is known.
    """

    def __init__(self, file: str | None, problems: tuple[str, ...]) -> None:
        super().__init__(file, problems)
        self.file = file
        self.problems = problems

    def __str__(self) -> str:
        prefix = f"{self.file}: " if self.file is not None else ""
        return "\n".join(f"{prefix}{problem}" for problem in self.problems)
