"""The context benchmark's labelled sets against their pinned corpus: the tuned set
(ops/bench/context/queries.toml) and the held-out one (heldout.toml, asked only of the
projects corpus.toml marks `heldout = true`, which the ranking was not tuned on):
enough queries, well formed, no duplicates, no project in both parts, and every
labelled file one that the pinned release really has (manifest/NAME.txt, written by
corpus.py from the unpacked archives, so this test needs no download)."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "context"
KINDS = {"how", "where", "symbol", "architecture", "tests", "bug"}
FIELDS = {"project", "kind", "text", "files", "few_shared_words"}
PROJECT_FIELDS = {"name", "version", "archive", "sha256", "root", "heldout"}


def corpus() -> list[dict[str, Any]]:
    projects: list[dict[str, Any]] = tomllib.loads((BENCH / "corpus.toml").read_text())["project"]
    return projects


def tuned_projects() -> set[str]:
    return {p["name"] for p in corpus() if not p.get("heldout", False)}


def heldout_projects() -> set[str]:
    return {p["name"] for p in corpus() if p.get("heldout", False)}


def queries(name: str = "queries.toml") -> list[dict[str, object]]:
    found: list[dict[str, object]] = tomllib.loads((BENCH / name).read_text())["query"]
    return found


def heldout() -> list[dict[str, object]]:
    return queries("heldout.toml")


def manifests() -> dict[str, set[str]]:
    return {
        p["name"]: set((BENCH / "manifest" / f"{p['name']}.txt").read_text().splitlines()) for p in corpus()
    }


def test_the_corpus_is_pinned_by_version_and_digest_with_a_manifest_each() -> None:
    projects = corpus()
    assert 5 <= len(tuned_projects()) <= 8
    assert 2 <= len(heldout_projects()) <= 4
    assert len({p["name"] for p in projects}) == len(projects)
    for project in projects:
        assert set(project) <= PROJECT_FIELDS, project["name"]
        assert project.get("heldout", False) in (True, False), project["name"]
        assert re.fullmatch(r"[0-9a-f]{64}", project["sha256"]), project["name"]
        assert re.fullmatch(r"\d+(\.\d+)+", project["version"]), project["name"]
        assert project["archive"].startswith(f"{project['name']}-{project['version']}"), project["name"]
    files = manifests()
    assert {p.name.removesuffix(".txt") for p in (BENCH / "manifest").iterdir()} == set(files)
    for name, paths in files.items():
        assert len(paths) >= 50, name
        assert all(not p.startswith(("/", "./")) and ".." not in p.split("/") for p in paths), name


def test_there_are_enough_queries_spread_over_every_project_and_kind() -> None:
    found = queries()
    assert len(found) >= 150
    per_project = Counter(str(q["project"]) for q in found)
    assert set(per_project) == tuned_projects()
    assert min(per_project.values()) >= 20
    assert {str(q["kind"]) for q in found} == KINDS
    assert sum(1 for q in found if q.get("few_shared_words")) >= 20


def test_the_held_out_set_has_enough_queries_over_every_held_out_project() -> None:
    found = heldout()
    assert len(found) >= 50
    per_project = Counter(str(q["project"]) for q in found)
    assert set(per_project) == heldout_projects()
    assert min(per_project.values()) >= 20
    assert {str(q["kind"]) for q in found} == KINDS
    assert sum(1 for q in found if q.get("few_shared_words")) >= len(found) // 10


def test_no_project_is_in_both_parts() -> None:
    """A held-out project asked in the tuned set (or the other way round) would let the
    tuning see it, or blur the held-out figures: each set asks only its own part."""
    assert tuned_projects().isdisjoint(heldout_projects())
    assert {str(q["project"]) for q in queries()} <= tuned_projects()
    assert {str(q["project"]) for q in heldout()} <= heldout_projects()


@pytest.mark.parametrize("name", ["queries.toml", "heldout.toml"])
def test_every_query_is_well_formed_and_asked_once(name: str) -> None:
    found = queries(name)
    for query in found:
        assert set(query) <= FIELDS, query
        assert {"project", "kind", "text", "files"} <= set(query), query
        assert query["kind"] in KINDS, query
        text = query["text"]
        assert isinstance(text, str), query
        assert text.strip() == text, query
        assert len(text) >= 5, query
        files = query["files"]
        assert isinstance(files, list), query
        assert files, query
        assert len(set(files)) == len(files), query
        assert query.get("few_shared_words", True) is True, query
    texts = Counter(" ".join(str(q["text"]).lower().split()) for q in found)
    assert [t for t, n in texts.items() if n > 1] == []


def test_no_question_is_asked_in_both_sets() -> None:
    def texts(found: list[dict[str, object]]) -> set[str]:
        return {" ".join(str(q["text"]).lower().split()) for q in found}

    assert texts(queries()) & texts(heldout()) == set()


@pytest.mark.parametrize("name", ["queries.toml", "heldout.toml"])
def test_every_labelled_file_is_in_the_pinned_release(name: str) -> None:
    files = manifests()
    missing = [
        f"{q['project']}: {path} ({q['text']})"
        for q in queries(name)
        for path in q["files"]  # type: ignore[attr-defined]
        if path not in files[str(q["project"])]
    ]
    assert missing == []
