"""Capture the `tools/list` answers of real MCP servers as the search benchmark's fixtures.

Every server of `servers.toml` is installed from its registry (npm or PyPI) at the
version written there, started over stdio, initialized with the official `mcp` client,
and its tools (and instructions) written to `fixtures/NAME.json` with the package, its
version and its licence. Servers that need credentials to run get harmless placeholder
values: they list their tools without calling anything. Run it again to refresh the
fixtures (it needs the registries; the benchmark itself does not):

    .venv/bin/python ops/bench/search/capture.py --work /tmp/capture      # every server
    .venv/bin/python ops/bench/search/capture.py --work /tmp/capture --only github
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
START_LIMIT = 90.0


def slug(package: str) -> str:
    """The folder one package is installed in."""
    return package.replace("/", "_").replace("@", "_")


def install(servers: dict[str, dict[str, Any]], work: Path) -> None:
    """Install every server's package into a folder of its own under `work` (npm/SLUG
    for npm, a venv py/PACKAGE for PyPI), as npx and uvx would: servers need
    dependency versions that cannot share one tree."""
    for server in servers.values():
        package, version = server["package"], server["version"]
        if server["registry"] == "npm":
            folder = work / "npm" / slug(package)
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder / "package.json").exists():
                (folder / "package.json").write_text('{"name": "capture", "private": true}\n')
            command = ["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--legacy-peer-deps"]
            subprocess.run([*command, f"{package}@{version}"], cwd=folder, check=True)
        else:
            folder = work / "py" / package
            if not folder.exists():
                venv.create(folder, with_pip=True)
            # `requirements`: pins a server needs that its own metadata does not state
            # (a later major version of a dependency it imports from)
            pins = server.get("requirements", [])
            subprocess.run(
                [str(folder / "bin" / "pip"), "install", "-q", f"{package}=={version}", *pins], check=True
            )


def params(server: dict[str, Any], work: Path) -> StdioServerParameters:
    """How to start one installed server."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work / "home"),
        **server.get("env", {}),
    }
    args = [arg.replace("{work}", str(work)) for arg in server.get("args", [])]
    if server["registry"] == "npm":
        binary = work / "npm" / slug(server["package"]) / "node_modules" / ".bin" / server["command"]
    else:
        binary = work / "py" / server["package"] / "bin" / server["command"]
    return StdioServerParameters(command=str(binary), args=args, env=env, cwd=str(work))


async def capture(name: str, server: dict[str, Any], work: Path) -> dict[str, Any]:
    with trio.fail_after(START_LIMIT):
        async with Client(params(server, work), mode="legacy") as client:
            tools = (await client.list_tools()).tools
            instructions = getattr(client, "instructions", None)
    return {
        "server": name,
        "registry": server["registry"],
        "package": server["package"],
        "version": server["version"],
        "licence": server["licence"],
        "source": server["source"],
        "instructions": instructions,
        "tools": [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="where to install the servers")
    parser.add_argument("--only", action="append", help="capture only this server (repeatable)")
    parser.add_argument("--no-install", action="store_true", help="the servers are installed in --work")
    args = parser.parse_args()
    servers: dict[str, dict[str, Any]] = tomllib.loads((HERE / "servers.toml").read_text())["servers"]
    if args.only:
        servers = {name: servers[name] for name in args.only}
    work = args.work.resolve()
    for folder in ("home", "files", "arxiv"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    if not (work / "repo" / ".git").exists():
        subprocess.run(["git", "init", "-q", str(work / "repo")], check=True)
    if not args.no_install:
        install(servers, work)
    FIXTURES.mkdir(exist_ok=True)
    failed = []
    for name, server in servers.items():
        try:
            fixture = trio.run(capture, name, server, work)
        except Exception as exc:  # one server that does not start leaves the others
            failed.append(name)
            print(f"{name}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        path = FIXTURES / f"{name}.json"
        # A server that writes its folder into a description gets a neutral one.
        text = json.dumps(fixture, indent=1, ensure_ascii=False).replace(str(work), "/path/to/project")
        path.write_text(text + "\n")
        print(f"{name}: {len(fixture['tools'])} tools -> {path.relative_to(HERE)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
