"""The backend side loads the `mcp` SDK only for the backends that need it.

Importing the SDK package costs the aggregator tens of megabytes (its `__init__` pulls a
web stack in), so the common configuration, stdio backends on protocol "legacy", must
run without it. Checked in a fresh interpreter: this test process has long imported it.
"""

from __future__ import annotations

import subprocess
import sys

SDK_MODULES = "sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))"


def loaded_after(*modules: str) -> str:
    imports = "".join(f"import {module}; " for module in modules)
    code = f"import sys; {imports}print({SDK_MODULES})"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def test_the_backend_supervisor_and_actor_do_not_import_the_sdk() -> None:
    assert loaded_after("assern.actors.backend.backends", "assern.actors.backend.actor") == "[]"


def test_the_sdk_session_does_import_it() -> None:
    """The check above would notice: the SDK's own paths do load it."""
    assert "'mcp'" in loaded_after("assern.actors.backend.sdk_client")
