"""The arrows of DESIGN.md hold in the checkout, and the checker catches each broken one."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from layering import cycles, import_graph, violations

ROOT = Path(__file__).resolve().parents[1]


def test_the_checkout_keeps_every_layering_rule() -> None:
    assert violations(ROOT) == []


def test_the_checkout_is_read_whole() -> None:
    graph, _ = import_graph(ROOT)
    assert "assern.supervisor.supervisor" in graph
    assert "assern.app.tree" in graph
    # the shell wires the actors together: it is the one layer that sees them all
    assert "assern.actors.config.actor" in graph["assern.app.tree"]
    assert "assern.supervisor.cell" in graph["assern.actors.config.actor"]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    packages = ("supervisor", "actors", "actors/config", "actors/router", "actors/search", "app", "context")
    for package in packages:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").touch()
    return root


OUTSIDE = "supervisor/ imports nothing outside"
SHELL = "nothing under actors/ imports the shell"
OTHER_ACTOR = "actors/config imports no other actor"
CONTEXT_OUT = "context/ imports only supervisor/, actors/search/text and actors/search/semantic"
CONTEXT_IN = "nothing imports context/"

ALLOWED = {
    "supervisor/cell.py": "import trio\n",
    "actors/config/spec.py": "from assern.supervisor.cell import Cell\n",
    "actors/router/catalog.py": "from assern.actors.config.spec import X\n",
    "app/tree.py": "from assern.actors.router import catalog\nfrom assern.supervisor import cell\n",
    "actors/search/text.py": "import re\n",
    "context/rank.py": "from assern.actors.search.text import Analyzer\nfrom assern.supervisor import cell\n",
    "context/server.py": "from assern.context import rank\n",
}


def test_a_tree_with_the_arrows_pointing_down_passes(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, ALLOWED)) == []


@pytest.mark.parametrize(
    ("file", "text", "reason"),
    [
        ("supervisor/spec.py", "from assern.actors.config import spec\n", OUTSIDE),
        ("supervisor/spec.py", "def f():\n    from assern.app import cli\n", OUTSIDE),
        ("supervisor/spec.py", "import mcp_types\n", "supervisor/ knows nothing of MCP"),
        ("actors/router/naming.py", "from assern.app.cli import main\n", SHELL),
        (
            "actors/config/layers.py",
            "if TYPE_CHECKING:\n    from assern.actors.router import catalog\n",
            OTHER_ACTOR,
        ),
        ("actors/config/layers.py", "from ..router import catalog\n", OTHER_ACTOR),
        ("app/tree.py", "import assern.app.cli\n", "import cycle: assern.app.cli -> assern.app.tree"),
        ("context/store.py", "from assern.actors.config.spec import ServerSpec\n", CONTEXT_OUT),
        ("context/store.py", "from assern.app import cli\n", CONTEXT_OUT),
        ("actors/config/spec.py", "from assern.context import rank\n", CONTEXT_IN),
        ("app/cli.py", "from assern.app.tree import run\nimport assern.context.server\n", CONTEXT_IN),
    ],
)
def test_each_forbidden_import_is_reported(tmp_path: Path, file: str, text: str, reason: str) -> None:
    files = {**ALLOWED, "app/cli.py": "from assern.app.tree import run\n", file: text}
    found = violations(_tree(tmp_path, files))
    assert len(found) == 1, found
    assert reason in found[0]


def test_cycles_are_found_through_several_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
