"""Which clients there are, their servers, and how each server relates to assern.

`classify` is pure: locations, the files as read and assern's servers in, findings out.
`survey_clients` reads the disk and calls it; `assernctl clients` prints its result and
`assernctl doctor` checks it. A server of a client either is assern (`assern`), is
also one of assern's backends, so it runs twice or bypasses assern's copy
(`duplicate`), or is reached only directly (`bypass`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs

from assern.actors.config.home import GLOBAL_CONFIG, LOCAL_DIR
from assern.actors.config.layers import ServerStacks, read_global, read_local
from assern.actors.config.project import find_local_root
from assern.actors.config.spec import ConfigError
from assern.app.ctl.clients.formats import ClientFile, ClientServer, is_assern, read_file, servers_at
from assern.app.ctl.clients.locations import CLIENTS, ClientName, Location, find_places
from assern.app.ctl.clients.translate import launch, translate

Reach = Literal["assern", "duplicate", "bypass"]


@attrs.frozen(kw_only=True)
class FileFinding:
    """One location of a client: whether its file exists, and what is wrong with it."""

    location: Location
    exists: bool
    error: str | None = None
    problems: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ServerFinding:
    """One server of a client and how it relates to assern.

    Attributes:
        server: The client's entry.
        reach: "assern" (the entry runs assern), "duplicate" (assern runs the same
            server as `backend`), or "bypass" (only the client reaches it).
        backend: The name of assern's server it duplicates.
    """

    server: ClientServer
    reach: Reach
    backend: str | None = None


@attrs.frozen(kw_only=True)
class ClientFinding:
    """One client found: its files and servers."""

    client: ClientName
    files: tuple[FileFinding, ...]
    servers: tuple[ServerFinding, ...]

    @property
    def wired(self) -> bool:
        """It has an entry that runs assern."""
        return any(finding.reach == "assern" for finding in self.servers)


@attrs.frozen(kw_only=True)
class Backends:
    """assern's servers seen from the current folder, by what starts each one.

    Attributes:
        launches: Server name → its command and args, or its URL (`translate.launch`).
        files: The config files they come from.
        problem: Why assern's configuration could not be read, or None.
    """

    launches: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    files: tuple[Path, ...] = ()
    problem: str | None = None

    def named(self, key: tuple[str, ...]) -> str | None:
        return next((name for name, found in self.launches.items() if found == key), None)


@attrs.frozen(kw_only=True)
class Survey:
    clients: tuple[ClientFinding, ...]
    backends: Backends
    notes: tuple[str, ...] = ()


def launches_of(stacks: ServerStacks) -> dict[str, tuple[str, ...]]:
    found = {}
    for name, layers in stacks.items():
        fields: dict[str, object] = {}
        for layer in layers:
            for field in ("command", "args", "url"):
                value = getattr(layer.config, field)
                if value is not None:
                    fields[field] = list(value) if field == "args" else value
            if layer.config.command is not None:
                fields.pop("url", None)
            elif layer.config.url is not None:
                fields.pop("command", None)
                fields.pop("args", None)
        if "command" in fields or "url" in fields:
            found[name] = launch(fields)
    return found


def read_backends(assern_home: Path | None, cwd: Path, home: Path | None) -> Backends:
    """assern's servers for `cwd`: the global config's, then its project's `.assern/`."""
    launches: dict[str, tuple[str, ...]] = {}
    files: list[Path] = []
    try:
        if assern_home is not None:
            source = read_global(assern_home / GLOBAL_CONFIG, required=False, home=home or cwd)
            launches |= launches_of(source.servers)
            files += source.files
        root = find_local_root(cwd)
        if root is not None:
            local = read_local(root, home=home or cwd)
            launches |= launches_of(local.servers)
            files += local.files
    except ConfigError as exc:
        return Backends(launches=launches, files=tuple(files), problem=str(exc))
    return Backends(launches=launches, files=tuple(files))


def server_reach(server: ClientServer, backends: Backends) -> ServerFinding:
    """How one client entry relates to assern's servers."""
    if is_assern(server.entry):
        return ServerFinding(server=server, reach="assern")
    translated = translate(server)
    table = translated.table if translated.problem is None else dict(server.entry)
    backend = backends.named(launch(table))
    if backend is not None:
        return ServerFinding(server=server, reach="duplicate", backend=backend)
    return ServerFinding(server=server, reach="bypass")


def classify(
    locations: Sequence[Location],
    files: Mapping[Path, ClientFile],
    installed: Sequence[ClientName],
    backends: Backends,
) -> tuple[ClientFinding, ...]:
    """Every client found and, per server, whether it reaches assern (pure).

    Args:
        locations: Where the clients may keep servers (`locations.find_places`).
        files: Those files as read, by path.
        installed: Clients whose folders exist even without a config file.
        backends: assern's servers.

    Returns:
        One finding per client that is installed or has a file, in `CLIENTS` order.
    """
    findings = []
    for client in CLIENTS:
        mine = [loc for loc in locations if loc.client == client]
        user = next((files[loc.path] for loc in mine if loc.scope == "user"), None)
        file_findings, servers = [], []
        for location in mine:
            file = files[location.path]
            found, problems = servers_at(location, file, user) if file.data is not None else ([], [])
            file_findings.append(
                FileFinding(location=location, exists=file.exists, error=file.error, problems=tuple(problems))
            )
            servers += [server_reach(server, backends) for server in found]
        if client in installed or any(f.exists for f in file_findings):
            findings.append(ClientFinding(client=client, files=tuple(file_findings), servers=tuple(servers)))
    return tuple(findings)


def survey_clients(
    environ: Mapping[str, str],
    cwd: Path,
    *,
    assern_home: Path | None,
    system: str = sys.platform,
) -> Survey:
    """Read every client's files and assern's config, and `classify` them.

    This is what `assernctl doctor` calls to check that each client reaches assern.

    Args:
        environ: The environment (HOME and the clients' own variables).
        cwd: The current folder (absolute).
        assern_home: `$ASSERN_HOME`, or None when neither it nor HOME is set.
        system: `sys.platform` (macOS paths for "darwin").
    """
    places = find_places(environ, cwd, system=system)
    files = {loc.path: read_file(loc.path, loc.syntax) for loc in places.locations}
    installed = [client for client, paths in places.markers.items() if any(p.exists() for p in paths)]
    home = Path(environ["HOME"]) if environ.get("HOME") else None
    backends = read_backends(assern_home, cwd, home)
    notes = list(places.notes)
    if backends.problem is not None:
        notes.append(
            f"assern's configuration does not read, so duplicates are not found:\n{backends.problem}"
        )
    return Survey(
        clients=classify(places.locations, files, installed, backends), backends=backends, notes=tuple(notes)
    )


def local_config(root: Path) -> Path:
    """A project's `.assern/config.toml`."""
    return root / LOCAL_DIR / GLOBAL_CONFIG
