"""The aggregators under test, their setup, and their configs written from one backends list.

Every aggregator gets the same backends, written once as an `mcpServers` file
(`backends.json`); each peer's own config is derived from that list. Peers live in their
own virtualenvs under `ops/bench/.peers/`, made by `setup_peer` (FastMCP is asyncio-only
and magg needs Python 3.12 or newer, so neither can share assern's environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / ".peers"
BENCH_SERVER = HERE / "bench_server.py"
FASTMCP_HUB = HERE / "fastmcp_hub.py"
#: environment variables of ours or of a peer that must not leak into another's run
SCRUBBED_PREFIXES = ("ASSERN_", "MAGG_", "FASTMCP_")


@attrs.frozen
class Backend:
    name: str
    command: str
    args: tuple[str, ...]


def bench_backends(count: int, tools: int, prefix: str = "b") -> list[Backend]:
    """`count` bench servers named b01, b02, … with `tools` tools each."""
    return [
        Backend(
            name=f"{prefix}{i:02d}",
            command=sys.executable,
            args=(str(BENCH_SERVER), "--tools", str(tools), "--name", f"{prefix}{i:02d}"),
        )
        for i in range(1, count + 1)
    ]


def mcp_servers(backends: Sequence[Backend]) -> dict[str, object]:
    return {"mcpServers": {b.name: {"command": b.command, "args": list(b.args)} for b in backends}}


def base_env() -> dict[str, str]:
    """Our environment without any aggregator's own settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}


# ------------------------------------------------------------------ aggregators


@attrs.frozen
class Launch:
    argv: list[str]
    env: dict[str, str]


@attrs.frozen
class Aggregator:
    """An aggregator that runs as its own process and serves MCP on stdio.

    Attributes:
        name: Column name in the report.
        peer: How to install it, for a peer (assern runs from the harness's own venv).
    """

    name: str
    peer: Peer | None = None

    def launch(self, workdir: Path, backends_file: Path, backends: Sequence[Backend]) -> Launch:
        env = base_env()
        if self.peer is None:
            assern = Path(sys.executable).with_name("assern")
            env |= {"ASSERN_HOME": str(workdir / "assern-home"), "ASSERN_NO_INSTANCE_SHARING": "1"}
            return Launch([str(assern), "serve", "--config", str(backends_file)], env)
        bin_dir = self.peer.venv / "bin"
        if self.name == "fastmcp":
            return Launch([str(bin_dir / "python"), str(FASTMCP_HUB), str(backends_file)], env)
        if self.name == "magg":
            config = workdir / "magg" / "config.json"
            write_magg_config(config, backends)
            env |= {"MAGG_CONFIG_PATH": str(config)}
            return Launch([str(bin_dir / "magg"), "serve", "--no-banner"], env)
        raise ValueError(f"unknown aggregator {self.name}")


@attrs.frozen
class Peer:
    """A peer's own virtualenv and what goes into it.

    Attributes:
        venv: Where its virtualenv lives.
        requirement: What `setup_peer` installs (a pinned version).
        dist: The distribution whose version is reported.
        min_python: The oldest Python it installs on.
    """

    venv: Path
    requirement: str
    dist: str
    min_python: tuple[int, int] = (3, 11)


def write_magg_config(path: Path, backends: Sequence[Backend]) -> None:
    """magg's `config.json`: one server per backend, its name as the tool prefix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    servers = {
        b.name: {"source": b.name, "prefix": b.name, "command": b.command, "args": list(b.args)}
        for b in backends
    }
    path.write_text(json.dumps({"servers": servers}, indent=2))


ASSERN = Aggregator(name="assern")
FASTMCP = Aggregator(
    name="fastmcp", peer=Peer(venv=PEERS_DIR / "fastmcp", requirement="fastmcp==4.1.2", dist="fastmcp")
)
MAGG = Aggregator(
    name="magg",
    peer=Peer(venv=PEERS_DIR / "magg", requirement="magg==1.3.0", dist="magg", min_python=(3, 12)),
)
PROCESS_AGGREGATORS = (ASSERN, FASTMCP, MAGG)
#: the SDK's ClientSessionGroup, measured in-process as a library baseline
GROUP = "sdk-group"
ALL_NAMES = (ASSERN.name, FASTMCP.name, MAGG.name, GROUP)


# ------------------------------------------------------------------------ setup


def _python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.stdout.split()
    return (int(parts[0]), int(parts[1])) if out.returncode == 0 and len(parts) == 2 else None


def find_python(minimum: tuple[int, int]) -> str | None:
    """An interpreter at least `minimum`: ours, then python3.X on PATH, then pyenv's."""
    candidates = [sys.executable]
    candidates += [found for v in (14, 13, 12) if (found := shutil.which(f"python3.{v}"))]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += [str(p) for p in sorted(pyenv.glob("3.*/bin/python3"), reverse=True)]
    for python in candidates:
        version = _python_version(python)
        if version is not None and version >= minimum:
            return python
    return None


def installed_version(peer: Peer) -> str | None:
    python = peer.venv / "bin" / "python"
    if not python.exists():
        return None
    out = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({peer.dist!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip() if out.returncode == 0 else None


def setup_peer(peer: Peer, log: Path) -> tuple[bool, str]:
    """Make the peer's virtualenv and install it, unless the pinned version is there.

    Returns (usable, what happened); a failure says why and leaves the rest of the run be.
    """
    wanted = peer.requirement.split("==")[-1]
    have = installed_version(peer)
    if have == wanted:
        where = peer.venv.relative_to(HERE) if peer.venv.is_relative_to(HERE) else peer.venv
        return True, f"{peer.dist} {have} (already installed in {where})"
    python = find_python(peer.min_python)
    if python is None:
        need = ".".join(map(str, peer.min_python))
        return False, f"not installed: needs Python >= {need}, none found on this machine"
    log.parent.mkdir(parents=True, exist_ok=True)
    steps = {
        f"{python} -m venv": [python, "-m", "venv", "--clear", str(peer.venv)],
        f"pip install {peer.requirement}": [
            str(peer.venv / "bin" / "pip"),
            "install",
            "--disable-pip-version-check",
            peer.requirement,
        ],
    }
    with log.open("w") as out:
        for label, argv in steps.items():
            try:
                done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=900)
            except (OSError, subprocess.SubprocessError) as exc:
                return False, f"not installed: {label}: {exc}"
            if done.returncode != 0:
                out.flush()
                tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
                return False, f"not installed: {label} failed: {tail[0]} (see {log})"
    have = installed_version(peer)
    if have is None:
        return False, f"not installed: {peer.dist} is not importable after pip install (see {log})"
    return True, f"{peer.dist} {have} (installed now with {python})"
