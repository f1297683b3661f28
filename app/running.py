"""What `assern` and `assernctl` share: the environment and configuration they resolve,
their `--version`, and a tree run for one command (`list`, `demo`, a direct `call`) and
stopped after it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import trio

from assern.actors.config.home import default_assern_home
from assern.actors.config.resolve import resolve_config
from assern.actors.identity import __version__
from assern.app.daemon.identity import build_id
from assern.app.hint import config_environ

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from assern.actors.config.spec import ResolvedConfig
    from assern.app.tree import Tree

T = TypeVar("T")


def environ() -> dict[str, str]:
    """The process environment, plus `ASSERN_PYTHON`: configs may start Python servers
    with the interpreter assern itself runs on."""
    return config_environ(os.environ)


def this_build(*, keep: bool = True) -> str:
    """This install's build id (app/daemon/identity.py; its cache in `$ASSERN_HOME`,
    written to when `keep`)."""
    return build_id(str(default_assern_home(environ())), keep=keep)


def version_line(program: str) -> str:
    """`assern 0.1.0 (build 0.1.0+3f9a1c2b4d5e)`."""
    return f"{program} {__version__} (build {this_build()})"


class VersionAction(argparse.Action):
    """`--version`: the program's version and build id (the build computed only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: object) -> None:
        super().__init__(
            option_strings,
            dest=dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show the version and build id",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        print(version_line(parser.prog))
        parser.exit()


def loader(config: Path | None, project: str | None, env: Mapping[str, str]) -> Callable[[], ResolvedConfig]:
    """Resolves the configuration as `assern serve` would here, each time it is called."""
    home = default_assern_home(env)
    cwd = Path.cwd()

    def load() -> ResolvedConfig:
        return resolve_config(config_path=config, project=project, cwd=cwd, environ=env, assern_home=home)

    return load


def run_dir() -> Path:
    return default_assern_home(environ()) / "run"


def tool_rows(tree: Tree, profile: str | None = None) -> list[dict[str, str]]:
    """The tools a client of `profile` (None: of no profile) may call, as `assernctl list`
    prints them (the same rows the running instance's control socket gives)."""
    from assern.actors.listener.report import tool_rows as rows

    return rows(tree.views.cell(profile).value)


def listed_everything(tree: Tree) -> bool:
    ready = {n for n, h in tree.directory.value.items() if h.status.state.value == "ready"}
    return ready <= tree.catalog.value.servers


async def until_listed(tree: Tree) -> None:
    version = tree.catalog.version
    while not listed_everything(tree):
        version, _ = await tree.catalog.changed(version)


async def with_tree(
    config: ResolvedConfig, load: Callable[[], ResolvedConfig], body: Callable[[Tree], Awaitable[T]]
) -> T:
    """Start the tree, wait until its backends settled and are listed, run `body`, stop."""
    from assern.app.loading import FullCollectionsDeferred

    with FullCollectionsDeferred():
        from assern.app.tree import Tree

    tree = Tree(config, load, stdio=False, handle_signals=False, run_dir=run_dir())
    async with trio.open_nursery() as nursery:
        await nursery.start(tree.run)
        with trio.move_on_after(max((s.startup_timeout for s in config.servers.values()), default=1) + 5):
            await tree.settled.wait()
        with trio.move_on_after(1):  # let the router publish the last ready listing
            await until_listed(tree)
        try:
            return await body(tree)
        finally:
            tree.shutdown()
    raise AssertionError("unreachable: the nursery returns only after `body` did")


async def list_rows(
    config: ResolvedConfig, load: Callable[[], ResolvedConfig], body: Callable[[Tree], Awaitable[T]]
) -> tuple[T, list[str]]:
    """`body`'s result on a fresh tree, and one line for each backend that is not ready."""

    async def run(tree: Tree) -> tuple[T, list[str]]:
        problems = [
            f"server '{h.name}' is {h.status.state.value}: {h.status.last_error or h.status.last_exit}"
            for h in tree.directory.value.values()
            if h.status.state.value not in ("ready", "lazy", "dormant")
        ]
        return await body(tree), problems

    return await with_tree(config, load, run)
