"""FastMCP's proxy as a user would build an aggregator with it, over stdio.

    .peers/fastmcp/bin/python fastmcp_hub.py backends.json
    .peers/fastmcp/bin/python fastmcp_hub.py backends.json --http PORT   # streamable HTTP at /mcp

One `FastMCP` server that mounts `create_proxy(...)` of every backend in an `mcpServers`
file under the backend's name as namespace (tools become `NAME_TOOL`). Runs in the
FastMCP virtualenv the harness set up (FastMCP is asyncio-only), never in assern's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.server import create_proxy


def build(config_path: Path) -> FastMCP:
    servers = json.loads(config_path.read_text())["mcpServers"]
    hub = FastMCP("fastmcp-hub")
    for name, entry in servers.items():
        hub.mount(create_proxy({"mcpServers": {name: entry}}, name=name), namespace=name)
    return hub


if __name__ == "__main__":
    hub = build(Path(sys.argv[1]))
    if sys.argv[2:3] == ["--http"]:
        hub.run(
            transport="http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False, log_level="warning"
        )
    else:
        hub.run(show_banner=False)
