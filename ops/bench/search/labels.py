"""The labelled queries of the search benchmark, and their held-out split.

Two sets:
- `own` (queries.toml): task sentences and the steps of multi-step tasks written for
  the project's first benchmark, knowing the tools.
- `readme` (tasks.toml): tasks as the servers' users state them, taken from the
  servers' README examples and use cases (each task names its source), some crossing
  two or three servers; each task has its whole sentence and its steps, every step
  labelled with the tools that answer it. Labelled before any ranking was looked at.

A query's `needs` are sets of tools: a step or a task of the own set has one need (any
one of its tools answers it); a whole task of the readme set has one need per step.

The split (split.toml) holds out units chosen at random with a recorded seed: a single
query, or a multi-step task with all its steps and its whole sentence (so no step of a
held-out task is ever seen while tuning). split.py writes it; units added later are
split by the same script without moving those already split.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
SPLIT = HERE / "split.toml"


@attrs.frozen
class Query:
    text: str
    #: one set of right tools (exposed names) per need
    needs: tuple[frozenset[str], ...]
    #: "task" (a whole task sentence) or "step" (one step of a multi-step task)
    kind: str
    #: "own" or "readme"
    source_set: str
    #: what the split holds out or keeps, whole
    unit: str

    @property
    def right(self) -> frozenset[str]:
        return frozenset().union(*self.needs)


def read(exposed: Mapping[tuple[str, str], str]) -> list[Query]:
    """Every labelled query, its labels (SERVER/TOOL) turned into exposed names."""

    def names(labels: list[str]) -> frozenset[str]:
        found = set()
        for label in labels:
            server, tool = label.split("/", 1)
            if (server, tool) not in exposed:
                raise SystemExit(f"unknown tool in a label: {label}")
            found.add(exposed[server, tool])
        return frozenset(found)

    found = []
    for raw in tomllib.loads((HERE / "queries.toml").read_text())["query"]:
        task = raw.get("task")
        found.append(
            Query(
                text=raw["text"],
                needs=(names(raw["tools"]),),
                kind="task" if task is None else "step",
                source_set="own",
                unit=f"own:{raw['text']}" if task is None else f"own-task:{task}",
            )
        )
    path = HERE / "tasks.toml"
    for raw in tomllib.loads(path.read_text())["task"] if path.exists() else []:
        unit = f"readme:{raw['id']}"
        steps = raw.get("step", [])
        needs = tuple(names(step["tools"]) for step in steps) or (names(raw["tools"]),)
        found.append(Query(text=raw["text"], needs=needs, kind="task", source_set="readme", unit=unit))
        found.extend(
            Query(
                text=step["text"], needs=(names(step["tools"]),), kind="step", source_set="readme", unit=unit
            )
            for step in steps
        )
    return found


def units() -> dict[str, list[str]]:
    """The units of each set (own, readme), as the split names them."""
    own = {
        f"own:{raw['text']}" if raw.get("task") is None else f"own-task:{raw['task']}"
        for raw in tomllib.loads((HERE / "queries.toml").read_text())["query"]
    }
    path = HERE / "tasks.toml"
    tasks = tomllib.loads(path.read_text())["task"] if path.exists() else []
    readme = {f"readme:{raw['id']}" for raw in tasks}
    return {"own": sorted(own), "readme": sorted(readme)}


def read_split() -> tuple[int, set[str], set[str]]:
    """The seed, the held-out units and the tuning units."""
    raw = tomllib.loads(SPLIT.read_text())
    return int(raw["seed"]), set(raw["heldout"]), set(raw["tuning"])


def part(query: Query, heldout: set[str], tuning: set[str]) -> str:
    if query.unit in heldout:
        return "heldout"
    if query.unit in tuning:
        return "tuning"
    raise SystemExit(f"{query.unit!r} is in no part of split.toml: run split.py to split it")
