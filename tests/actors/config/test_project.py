"""Project detection: directory patterns, specificity, local config, --project."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from assern.actors.config.home import expand_user, user_home
from assern.actors.config.project import (
    ProjectMatch,
    detect_project,
    find_local_root,
    match_directories,
    pattern_rank,
)
from assern.actors.config.spec import ConfigError

HOME = Path("/home/u")


def d(path: str) -> PurePosixPath:
    return PurePosixPath(path)


@pytest.mark.parametrize(
    ("pattern", "directory", "matches"),
    [
        ("~/work/x", "/home/u/work/x", True),
        ("~/work/x", "/home/u/work/x/sub", False),  # exact is exactly that folder
        ("~/work/x", "/home/u/work", False),
        ("~/work/*", "/home/u/work/x", True),
        ("~/work/*", "/home/u/work/x/sub", False),  # * is one level only
        ("~/work/*", "/home/u/work", False),
        ("~/work/**", "/home/u/work", True),  # ** includes the folder itself
        ("~/work/**", "/home/u/work/x", True),
        ("~/work/**", "/home/u/work/x/y/z", True),
        ("~/work/**", "/home/u/workshop", False),
        ("/srv/code/*", "/srv/code/app", True),
        ("~/work/client-*", "/home/u/work/client-a", True),
        ("~/work/client-*", "/home/u/work/other", False),
    ],
)
def test_pattern_kinds(pattern: str, directory: str, matches: bool) -> None:
    """`x` matches exactly, `*` one level below, `**` any depth."""
    assert (pattern_rank(pattern, d(directory), HOME) is not None) is matches


def test_exact_beats_one_level_beats_any_depth() -> None:
    """For the same folder, exact > * > **."""
    folder = d("/home/u/work/x")
    ranks = [pattern_rank(p, folder, HOME) for p in ("~/work/x", "~/work/*", "~/work/**")]
    assert None not in ranks
    assert ranks == sorted(ranks, reverse=True)  # type: ignore[type-var]  # no None: asserted above
    assert len(set(ranks)) == 3


def test_most_specific_project_wins() -> None:
    """Exact beats * beats **; among equals the longer prefix wins; ties go to the first."""
    projects = {
        "everything": ["~/**"],
        "work": ["~/work/**"],
        "clients": ["~/work/clients/*"],
        "special": ["~/work/clients/special"],
        "twin": ["~/work/**"],
    }
    assert match_directories(projects, d("/home/u/notes"), HOME) == "everything"
    assert match_directories(projects, d("/home/u/work/a/b"), HOME) == "work"
    assert match_directories(projects, d("/home/u/work/clients/acme"), HOME) == "clients"
    assert match_directories(projects, d("/home/u/work/clients/special"), HOME) == "special"
    assert match_directories(projects, d("/elsewhere"), HOME) is None


def test_one_level_beats_any_depth_with_longer_prefix() -> None:
    """The pattern kind is compared before the prefix length."""
    projects = {"deep": ["~/work/x/**"], "level": ["~/work/*"]}
    assert match_directories(projects, d("/home/u/work/x"), HOME) == "level"


def test_explicit_project_wins() -> None:
    match = detect_project(
        explicit="home",
        cwd=d("/home/u/work/x"),
        home=HOME,
        projects={"work": ["~/work/**"], "home": []},
        local_root=d("/home/u/work/x"),
        local_project="work",
    )
    assert match == ProjectMatch(name="home", source="argument")


def test_unknown_explicit_project_lists_known_projects() -> None:
    with pytest.raises(ConfigError) as caught:
        detect_project(
            explicit="nope",
            cwd=d("/home/u"),
            home=HOME,
            projects={"work": [], "home": []},
            config_file="/cfg.toml",
        )
    assert caught.value.file == "/cfg.toml"
    assert caught.value.problems == ("unknown project 'nope' (known projects: 'work', 'home')",)
    with pytest.raises(ConfigError, match="no projects are defined"):
        detect_project(explicit="nope", cwd=d("/"), home=HOME, projects={})


def test_local_config_project_beats_directories() -> None:
    match = detect_project(
        explicit=None,
        cwd=d("/home/u/work/x"),
        home=HOME,
        projects={"work": ["~/work/**"]},
        local_root=d("/home/u/work/x"),
        local_project="special",
    )
    assert match == ProjectMatch(name="special", source="local-config")


def test_directories_when_local_config_names_no_project() -> None:
    """A local root that names no project still gets the directory match (cwd, then root)."""
    projects = {"work": ["~/work/*"]}
    match = detect_project(
        explicit=None,
        cwd=d("/home/u/work/x/deep/inside"),
        home=HOME,
        projects=projects,
        local_root=d("/home/u/work/x"),
    )
    assert match == ProjectMatch(name="work", source="directories")


def test_local_folder_labels_an_unmatched_local_root() -> None:
    match = detect_project(
        explicit=None, cwd=d("/srv/repo"), home=HOME, projects={}, local_root=d("/srv/repo")
    )
    assert match == ProjectMatch(name="repo", source="local-folder")


def test_no_project() -> None:
    match = detect_project(explicit=None, cwd=d("/srv"), home=HOME, projects={"w": ["~/w/**"]})
    assert match == ProjectMatch(name=None, source="none")


def test_find_local_root_takes_the_nearest(tmp_path: Path) -> None:
    """The nearest folder whose .assern/ holds config.toml or .env; a bare .assern/ is not one."""
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (outer / ".assern").mkdir(parents=True)
    (outer / ".assern" / "config.toml").write_text("")
    (inner / ".assern").mkdir(parents=True)
    (inner / "src" / "pkg").mkdir(parents=True)
    assert find_local_root(inner / "src" / "pkg") == outer  # inner's .assern/ is empty
    (inner / ".assern" / ".env").write_text("A=1\n")
    assert find_local_root(inner / "src" / "pkg") == inner
    assert find_local_root(inner) == inner
    assert find_local_root(tmp_path) is None


def test_home_helpers() -> None:
    assert user_home({"HOME": "/fake"}) == Path("/fake")
    assert expand_user("~", HOME) == "/home/u"
    assert expand_user("~/x", HOME) == "/home/u/x"
    assert expand_user("~other/x", HOME) == "~other/x"
    assert expand_user("/abs", HOME) == "/abs"
