"""The import rules of the tree (DESIGN.md, "Layering"), read from the source with `ast`.

Arrows point one way only: app → actors → supervisor, and context → supervisor.
- `supervisor/` imports nothing of the project outside itself, and nothing of MCP;
- `context/` (the context server, its own process) imports `supervisor/`, the text
  helpers of `actors/search/text.py` and the semantic extra's model loader
  (`actors/search/semantic.py`), nothing else of the project; nothing imports it
  (the config starts it as `python -I -m assern.context`, by name);
- `actors/config/` imports no other actor;
- nothing under `actors/` or `supervisor/` imports the shell (`app/`);
- no two modules import each other, directly or through others (every import counts:
  at module level, inside a function, or under `TYPE_CHECKING`).

`violations(root)` returns one readable line per broken rule; tests call it on the
checkout and on small made-up trees, so the rules themselves are tested too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

#: The folders that are installed as `assern.<folder>`.
PACKAGES = ("supervisor", "actors", "app", "context", "examples")
#: What `context/` may import of `actors/`: the pure text helpers, nothing with state.
CONTEXT_OK = ("assern.actors.search.text", "assern.actors.search.semantic")
#: Third-party names that only the MCP side of the project may import.
MCP_LIBRARIES = ("mcp", "mcp_types", "pydantic")


def modules(root: Path) -> dict[str, Path]:
    """Every module of the project under `root`, by its installed dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(["assern", *parts])] = path
    return found


def _imported(name: str, path: Path, tree: ast.AST, known: Mapping[str, Path]) -> Iterator[str]:
    """The dotted names `tree` imports: a module of the project when one is named."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                # `from assern.actors.listener import control_protocol` imports that module
                submodule = f"{target}.{alias.name}"
                yield submodule if submodule in known else target


def import_graph(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(project module → project modules it imports, module → third-party top-level names)."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    outside: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target in _imported(name, path, tree, known):
            if target.split(".")[0] != "assern":
                outside[name].add(target.split(".")[0])
                continue
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph, outside


def _layer(module: str) -> str:
    """`supervisor`, `app`, `examples`, or `actors.<actor>`."""
    parts = module.split(".")
    return ".".join(parts[1:3]) if parts[1] == "actors" and len(parts) > 2 else parts[1]


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations(root: Path) -> list[str]:
    """Every broken layering rule under `root`, one line each (empty when all hold)."""
    graph, outside = import_graph(root)
    problems = []
    for module, targets in sorted(graph.items()):
        layer = _layer(module)
        for target in sorted(targets):
            other = _layer(target)
            if layer == "supervisor" and other != "supervisor":
                problems.append(f"{module} imports {target}: supervisor/ imports nothing outside itself")
            elif layer.startswith(("actors", "supervisor")) and other == "app":
                problems.append(f"{module} imports {target}: nothing under actors/ imports the shell")
            elif layer == "actors.config" and other.startswith("actors.") and other != "actors.config":
                problems.append(f"{module} imports {target}: actors/config imports no other actor")
            elif layer == "context" and other not in ("context", "supervisor") and target not in CONTEXT_OK:
                problems.append(
                    f"{module} imports {target}: context/ imports only supervisor/, actors/search/text"
                    " and actors/search/semantic"
                )
            elif layer != "context" and other == "context":
                problems.append(f"{module} imports {target}: nothing imports context/ (it is a process)")
        if layer == "supervisor":
            mcp = sorted(outside[module] & set(MCP_LIBRARIES))
            problems += [f"{module} imports {library}: supervisor/ knows nothing of MCP" for library in mcp]
    problems += [f"import cycle: {' -> '.join(component)}" for component in cycles(graph)]
    return problems
