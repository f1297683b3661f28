"""The context benchmark's labelled set (ops/bench/context/queries.toml) against its
pinned corpus: enough queries, well formed, no duplicates, and every labelled file one
that the pinned release really has (manifest/NAME.txt, written by corpus.py from the
unpacked archives, so this test needs no download)."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "context"
KINDS = {"how", "where", "symbol", "architecture", "tests", "bug"}
FIELDS = {"project", "kind", "text", "files", "few_shared_words"}


def corpus() -> list[dict[str, str]]:
    projects: list[dict[str, str]] = tomllib.loads((BENCH / "corpus.toml").read_text())["project"]
    return projects


def queries() -> list[dict[str, object]]:
    found: list[dict[str, object]] = tomllib.loads((BENCH / "queries.toml").read_text())["query"]
    return found


def manifests() -> dict[str, set[str]]:
    return {
        p["name"]: set((BENCH / "manifest" / f"{p['name']}.txt").read_text().splitlines()) for p in corpus()
    }


def test_the_corpus_is_pinned_by_version_and_digest_with_a_manifest_each() -> None:
    projects = corpus()
    assert 5 <= len(projects) <= 8
    assert len({p["name"] for p in projects}) == len(projects)
    for project in projects:
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
    assert set(per_project) == {p["name"] for p in corpus()}
    assert min(per_project.values()) >= 20
    assert {str(q["kind"]) for q in found} == KINDS
    assert sum(1 for q in found if q.get("few_shared_words")) >= 20


def test_every_query_is_well_formed_and_asked_once() -> None:
    found = queries()
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


def test_every_labelled_file_is_in_the_pinned_release() -> None:
    files = manifests()
    missing = [
        f"{q['project']}: {path} ({q['text']})"
        for q in queries()
        for path in q["files"]  # type: ignore[attr-defined]
        if path not in files[str(q["project"])]
    ]
    assert missing == []
