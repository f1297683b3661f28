"""The trust gate in resolution: what a folder's own files give before and after a grant."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_world import World

from assern.actors.config.sources import trust_file
from assern.actors.config.spec import ConfigError
from assern.actors.config.trust import untrusted_projects

GLOBAL = """
[servers.mine]
command = "mine"

[projects.work]
directories = ["~/work/**"]
env = { FROM_PROJECT = "p" }
"""

LOCAL = """
project = "other"

[settings]
naming = "hybrid"

[servers.build]
command = "sh"
args = ["-c", "touch MARKER"]

[servers.mine]
env = { INJECTED = "${HOME}" }
"""


@pytest.fixture
def repo(world: World) -> Path:
    world.global_config(GLOBAL)
    world.write("work/repo/.assern/config.toml", LOCAL)
    world.write("work/repo/.assern/.env", "FROM_DOTENV=x\n")
    return world.home / "work" / "repo"


def test_untrusted_files_give_nothing(world: World, repo: Path) -> None:
    resolved = world.resolve(cwd="work/repo", trusted=False)
    assert list(resolved.servers) == ["mine"]
    mine = resolved.servers["mine"]
    assert "INJECTED" not in mine.env  # a table overriding the user's server: left out too
    assert "FROM_DOTENV" not in mine.env
    assert mine.env["FROM_PROJECT"] == "p"  # the user's own [projects.work] applies
    assert resolved.project == "work"  # by the user's directories, not the file's `project =`
    assert resolved.settings.naming == "prefix"
    assert resolved.files == (world.assern_home / "config.toml",)
    (untrusted,) = untrusted_projects(resolved)
    assert untrusted.project.folder == str(repo)
    assert list(untrusted.project.servers) == ["build", "mine"]
    assert untrusted.reason == "new"
    assert trust_file(world.assern_home) in resolved.trust.watched
    assert repo / ".assern" / "config.toml" in resolved.trust.watched


def test_trusted_files_apply(world: World, repo: Path) -> None:
    resolved = world.resolve(cwd="work/repo/", trusted=True)
    assert list(resolved.servers) == ["mine", "build"]
    assert resolved.servers["mine"].env["INJECTED"] == str(world.home)
    assert resolved.servers["mine"].env["FROM_DOTENV"] == "x"
    assert resolved.project == "other"
    assert resolved.trust.trusted == (str(repo),)
    assert resolved.trust.untrusted == ()
    assert resolved.trust.watched == (trust_file(world.assern_home),)


def test_edits_that_change_nothing_that_runs_keep_the_trust(world: World, repo: Path) -> None:
    world.resolve(cwd="work/repo", trusted=True)
    reordered = LOCAL.replace("[servers.build]", "# the build server\n[servers.build]  ")
    world.write("work/repo/.assern/config.toml", "\n\n" + reordered.replace('"sh"', "'sh'"))
    assert "build" in world.resolve(cwd="work/repo", trusted=False).servers


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('args = ["-c", "touch MARKER"]', 'args = ["-c", "touch NEW"]'),
        ('command = "sh"', 'command = "bash"'),
        ('naming = "hybrid"', 'naming = "prefix"'),
        ("[servers.build]", '[servers.build]\ncwd = "/"'),
    ],
)
def test_a_change_that_runs_otherwise_is_untrusted(world: World, repo: Path, before: str, after: str) -> None:
    world.resolve(cwd="work/repo", trusted=True)
    world.write("work/repo/.assern/config.toml", LOCAL.replace(before, after, 1))
    resolved = world.resolve(cwd="work/repo", trusted=False)
    assert list(resolved.servers) == ["mine"]  # neither the new nor the old content runs
    assert [item.reason for item in resolved.trust.untrusted] == ["changed"]


def test_a_changed_dotenv_value_is_untrusted(world: World, repo: Path) -> None:
    world.resolve(cwd="work/repo", trusted=True)
    world.write("work/repo/.assern/.env", "FROM_DOTENV=y\n")
    (untrusted,) = world.resolve(cwd="work/repo", trusted=False).trust.untrusted
    assert untrusted.changes == ("~ .env: values changed",)


def test_a_moved_folder_is_not_trusted(world: World, repo: Path) -> None:
    world.resolve(cwd="work/repo", trusted=True)
    repo.rename(repo.with_name("renamed"))
    resolved = world.resolve(cwd="work/renamed", trusted=False)
    assert "build" not in resolved.servers
    assert [item.reason for item in resolved.trust.untrusted] == ["new"]


def test_a_symlinked_assern_folder_is_trusted_for_what_it_points_at(world: World) -> None:
    world.global_config(GLOBAL)
    first = world.write("targets/one/config.toml", LOCAL)
    world.write("targets/two/config.toml", LOCAL)
    repo = world.folder("work/repo")
    (repo / ".assern").symlink_to(first.parent)
    trusted = world.resolve(cwd="work/repo", trusted=True)
    assert "build" in trusted.servers
    record = trusted.trust.trusted
    assert record == (str(repo),)

    (repo / ".assern").unlink()
    (repo / ".assern").symlink_to(world.home / "targets" / "two")  # the same text elsewhere
    (untrusted,) = world.resolve(cwd="work/repo", trusted=False).trust.untrusted
    assert untrusted.reason == "changed"
    assert any("files now read" in line for line in untrusted.changes)


def test_a_symlinked_project_folder_is_recorded_by_its_real_path(world: World, repo: Path) -> None:
    link = world.home / "link"
    link.symlink_to(repo)
    resolved = world.resolve(cwd="link", trusted=True)
    assert resolved.trust.trusted == (str(repo),)
    assert "build" in world.resolve(cwd="work/repo", trusted=False).servers


def test_a_context_root_outside_the_project_in_an_untrusted_file_is_not_used(world: World) -> None:
    world.write("repo/.assern/config.toml", '[servers.code]\nbuiltin = "context"\nroot = "~"\n')
    resolved = world.resolve(cwd="repo", trusted=False)
    assert resolved.servers == {}
    assert not any("assern.context" in " ".join(spec.args) for spec in resolved.servers.values())


def test_a_discovered_mcp_servers_file_of_the_folder_needs_trust(world: World) -> None:
    world.write("repo/mcp-config.json", '{"mcpServers": {"cl": {"command": "cl"}}}')
    untrusted = world.resolve(cwd="repo", trusted=False)
    assert untrusted.servers == {}
    assert untrusted.files == ()
    assert [item.project.file_names() for item in untrusted.trust.untrusted] == [["mcp-config.json"]]
    assert list(world.resolve(cwd="repo", trusted=True).servers) == ["cl"]


def test_the_users_own_files_need_no_trust(world: World) -> None:
    world.write(".config/cllm-mcp/config.json", '{"mcpServers": {"user": {"command": "u"}}}')
    named = world.write("repo/named.toml", '[servers.named]\ncommand = "n"\n')
    assert list(world.resolve(cwd="repo", trusted=False).servers) == ["user"]
    by_flag = world.resolve(cwd="repo", config_path=named, trusted=False)
    assert list(by_flag.servers) == ["named"]
    assert by_flag.trust.store is None  # no folder's own file was read: the store is not either


def test_a_corrupt_store_trusts_no_folder(world: World, repo: Path) -> None:
    world.resolve(cwd="work/repo", trusted=True)
    trust_file(world.assern_home).write_text("{broken")
    resolved = world.resolve(cwd="work/repo", trusted=False)
    assert list(resolved.servers) == ["mine"]
    assert resolved.trust.store_problem is not None
    assert resolved.trust.lines()[0].startswith(f"the trust store {trust_file(world.assern_home)} is ignored")


def test_an_untrusted_file_that_does_not_parse_is_still_named(world: World) -> None:
    bad = world.write("repo/.assern/config.toml", "[servers.x\n")
    with pytest.raises(ConfigError) as refused:
        world.resolve(cwd="repo", trusted=False)
    assert refused.value.file == str(bad)


def test_an_empty_assern_folder_marks_a_root_and_asks_nothing(world: World) -> None:
    world.write("repo/.assern/config.toml", "# nothing yet\n")
    resolved = world.resolve(cwd="repo", trusted=False)
    assert resolved.project == "repo"
    assert resolved.trust.untrusted == ()


def test_a_variable_from_an_untrusted_dotenv_is_undefined_and_the_error_says_why(world: World) -> None:
    config = world.global_config('[servers.gh]\ncommand = "gh"\nenv = { TOKEN = "${REPO_TOKEN}" }\n')
    world.write("repo/.assern/.env", "REPO_TOKEN=t\n")
    with pytest.raises(ConfigError) as refused:
        world.resolve(cwd="repo", trusted=False)
    assert refused.value.file == str(config)
    assert "undefined variable 'REPO_TOKEN'" in refused.value.problems[0]
    assert refused.value.problems[-1] == (
        f"(not read: {world.home / 'repo'}'s own files, which are not trusted; if a value should come "
        f"from them, review and allow them with `assernctl trust {world.home / 'repo'}`)"
    )
    assert world.resolve(cwd="repo", trusted=True).servers["gh"].env["TOKEN"] == "t"
