"""Proxy hints: a start may skip resolution only when nothing it depended on changed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from assern.actors.config.resolve import resolve_config
from assern.app.hint import (
    MAX_HINTS,
    config_environ,
    env_digest,
    hint_file,
    hint_key,
    make_hint,
    referenced_names,
    valid_hint,
    watched_paths,
    write_hint,
)
from assern.app.instance import fingerprint


class World:
    """A home, an `$ASSERN_HOME` with a global config, a project folder to work in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.assern_home = self.home / "assern"
        self.work = self.home / "code" / "app" / "src"
        self.work.mkdir(parents=True)
        self.assern_home.mkdir()
        (self.assern_home / "config.toml").write_text(
            '[servers.gh]\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "${TOKEN}" }\n'
        )
        self.env = config_environ(
            {"HOME": str(self.home), "ASSERN_HOME": str(self.assern_home), "TOKEN": "t1"}
        )

    def key(self, args: list[str] | None = None) -> dict[str, Any]:
        return hint_key(args or [], str(self.work), self.env)

    def resolve(self) -> Any:
        return resolve_config(
            config_path=None, project=None, cwd=self.work, environ=self.env, assern_home=self.assern_home
        )

    def leave_hint(self, args: list[str] | None = None) -> str:
        key = self.key(args)
        config = self.resolve()
        hint = make_hint(
            config,
            key=key,
            environ=self.env,
            assern_home=self.assern_home,
            fingerprint=fingerprint(config),
            slot="assern",
            mcp=self.assern_home / "run" / "assern.sock",
            control=self.assern_home / "run" / "assern.ctl",
            lock=self.assern_home / "run" / "assern.lock",
        )
        path = hint_file(self.assern_home, key)
        write_hint(path, hint)
        return path

    def found(self, args: list[str] | None = None) -> dict[str, Any] | None:
        key = self.key(args)
        return valid_hint(hint_file(self.assern_home, key), key, self.env)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_a_written_hint_is_found_by_the_same_start(world: World) -> None:
    path = world.leave_hint()
    found = world.found()
    assert found is not None
    assert found["fingerprint"] == fingerprint(world.resolve())
    assert found["mcp"].endswith("assern.sock")
    assert found["slot"] == "assern"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700


def test_the_hint_stores_a_digest_of_referenced_values_never_the_values(world: World) -> None:
    world.env["TOKEN"] = "ghp_distinctive_secret_value"
    path = world.leave_hint()
    text = Path(path).read_text()
    assert "ghp_distinctive_secret_value" not in text
    assert "TOKEN" in json.loads(text)["env_names"]


def test_other_arguments_folder_or_home_find_no_hint(world: World) -> None:
    world.leave_hint()
    assert world.found(["--project", "other"]) is None
    world.work = world.work.parent
    assert world.found() is None


def test_a_changed_config_file_invalidates_the_hint(world: World) -> None:
    world.leave_hint()
    config = world.assern_home / "config.toml"
    config.write_text(config.read_text() + "timeout = 5\n")
    assert world.found() is None


def test_a_changed_referenced_variable_invalidates_it_an_unrelated_one_does_not(world: World) -> None:
    world.leave_hint()
    world.env["SHLVL"] = "3"
    assert world.found() is not None
    world.env["TOKEN"] = "t2"
    assert world.found() is None


@pytest.mark.parametrize(
    "created",
    [
        "assern/.env",  # the global .env
        "code/app/.assern/config.toml",  # a project root appearing above the working folder
        "code/app/src/.assern/.env",  # a local .env in the working folder
        "assern/config.yaml",  # the original layout's config next to ours
    ],
)
def test_a_file_that_would_contribute_invalidates_it_once_created(world: World, created: str) -> None:
    world.leave_hint()
    path = world.home / created
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("X=1\n")
    assert world.found() is None


def test_watched_paths_stop_at_the_project_root(world: World) -> None:
    local = world.home / "code" / ".assern"
    local.mkdir()
    (local / "config.toml").write_text('[servers.lint]\ncommand = "lint-mcp"\n')
    paths = watched_paths(world.resolve(), cwd=str(world.work), assern_home=world.assern_home, args=[])
    assert str(local / "config.toml") in paths
    assert str(world.home / "code" / "app" / ".assern" / ".env") in paths
    assert not any(path.startswith(str(world.home / ".assern")) for path in paths)


def test_a_hint_in_a_folder_others_may_write_is_ignored(world: World) -> None:
    path = world.leave_hint()
    os.chmod(os.path.dirname(path), 0o777)
    assert world.found() is None


def test_a_damaged_hint_is_ignored(world: World) -> None:
    path = world.leave_hint()
    Path(path).write_text('{"key": ')
    assert world.found() is None
    Path(path).write_text(json.dumps({"key": world.key(), "files": {}, "env_names": []}))
    assert world.found() is None


def test_only_the_newest_hints_are_kept(world: World) -> None:
    for index in range(MAX_HINTS + 5):
        world.leave_hint(["--project", f"p{index}"])
    folder = Path(hint_file(world.assern_home, world.key())).parent
    assert len(list(folder.glob("*.json"))) == MAX_HINTS
    assert world.found(["--project", f"p{MAX_HINTS + 4}"]) is not None


def test_referenced_names_and_the_env_digest() -> None:
    assert referenced_names(["a ${TOKEN} $HOME_DIR ${X:-d} $$ $5 ${ }"]) == {"TOKEN", "HOME_DIR", "X"}
    assert env_digest(["A", "B"], {"A": "1"}) == env_digest(["B", "A"], {"A": "1", "C": "2"})
    assert env_digest(["A"], {"A": "1"}) != env_digest(["A"], {})


def test_a_trust_grant_or_revoke_invalidates_the_hint_and_the_notice_is_kept(world: World) -> None:
    """The trust store is a file the resolution read: the quick path must not proxy to the
    primary of the untrusted configuration once the folder is trusted (nor the reverse)."""
    from assern.actors.config.sources import read_sources, trust_file
    from assern.actors.config.trust import grant, revoke

    root = world.home / "code" / "app"
    (root / ".assern").mkdir()
    (root / ".assern" / "config.toml").write_text('[servers.build]\ncommand = "sh"\n')
    world.leave_hint()
    hint = world.found()
    assert hint is not None
    (notice,) = hint["notices"]
    assert notice.startswith(f"{root}: 1 server(s) from .assern/config.toml not started")

    found = read_sources(config_path=None, cwd=world.work, environ=world.env, assern_home=world.assern_home)
    grant(trust_file(world.assern_home), found.projects, now="2026-01-01T00:00:00+00:00")
    assert world.found() is None
    world.leave_hint()
    trusted = world.found()
    assert trusted is not None
    assert trusted["notices"] == []

    revoke(trust_file(world.assern_home), [str(root)])
    assert world.found() is None


def test_a_hint_with_notices_that_are_not_lines_is_ignored(world: World) -> None:
    path = world.leave_hint()
    hint = json.loads(Path(path).read_text())
    hint["notices"] = [{"not": "a line"}]
    Path(path).write_text(json.dumps(hint))
    assert world.found() is None
