"""Loading a script of `ops/` by its path: its folders are no packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

OPS = Path(__file__).resolve().parents[2] / "ops"


def load_script(path: Path, name: str) -> Any:
    """The script at `path` as the module `name` (a name of its own: several scripts are
    called run.py), registered in `sys.modules` so its attrs classes and dataclasses
    resolve; its own folder's siblings it puts on `sys.path` itself."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
