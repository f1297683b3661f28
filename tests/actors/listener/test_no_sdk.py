"""The aggregator's listener serves handshake-era clients without loading the `mcp` SDK.

The SDK package (not `mcp_types`, its protocol models) would cost about a third of the
aggregator's memory: only a 2026-07-28 client's connection and the in-process SDK
client may load it, when they are used.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Imports the listener as the tree does, and reports which of our modules import the SDK.
PROBE = """
import builtins, json, sys

importers = set()
real_import = builtins.__import__


def spy(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if level == 0 and (name == "mcp" or name.startswith("mcp.")) and importer.startswith("assern."):
        importers.add(importer)
    return real_import(name, globals, locals, fromlist, level)


builtins.__import__ = spy
import assern.actors.listener.actor
import assern.actors.listener.session
import assern.actors.listener.control
import assern.actors.listener.inproc
import assern.actors.listener.protocol

print(json.dumps({"loaded": "mcp" in sys.modules, "importers": sorted(importers)}))
"""


def probe() -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_no_listener_module_imports_the_sdk() -> None:
    assert probe()["importers"] == []


def test_importing_the_listener_does_not_load_the_sdk() -> None:
    assert probe()["loaded"] is False
