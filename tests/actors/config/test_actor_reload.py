"""The config actor's reloads: by message, by file change, broken and good, on a virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import structlog
import trio
import trio.testing
from config_world import World

from assern.actors.backend.backends import BackendsMsg
from assern.actors.config.actor import ConfigActor, ConfigMsg, Reload
from assern.actors.config.spec import ConfigError, DesiredSet, ResolvedConfig, ServerSpec, Settings
from assern.supervisor.cell import Cell

from .fakefs import FakeFiles

CONFIG = Path("/home/u/.valksor/assern/config.toml")
DOTENV = Path("/home/u/.valksor/assern/.env")
LOCAL = Path("/repo/.assern/config.toml")


def config(*names: str, args: tuple[str, ...] = ()) -> ResolvedConfig:
    servers = {n: ServerSpec(name=n, transport="stdio", command="srv", args=args) for n in names}
    return ResolvedConfig(
        settings=Settings(), servers=servers, project=None, files=(CONFIG,), potential_files=(DOTENV,)
    )


class Loader:
    """What `load` returns next: a config, or a ConfigError to raise. Counts its calls."""

    def __init__(self, result: ResolvedConfig | ConfigError) -> None:
        self.result = result
        self.calls = 0

    def __call__(self) -> ResolvedConfig:
        self.calls += 1
        if isinstance(self.result, ConfigError):
            raise self.result
        return self.result


@attrs.define
class Running:
    actor: ConfigActor
    inbox: trio.MemorySendChannel[ConfigMsg]
    desired: trio.MemoryReceiveChannel[BackendsMsg]

    def sent(self) -> list[DesiredSet]:
        """Every DesiredSet the actor has sent so far (call after the tasks settle)."""
        out: list[DesiredSet] = []
        while True:
            try:
                msg = self.desired.receive_nowait()
            except trio.WouldBlock:
                return out
            assert isinstance(msg, DesiredSet)
            out.append(msg)


@asynccontextmanager
async def running(
    load: Callable[[], ResolvedConfig], files: FakeFiles | None = None
) -> AsyncIterator[Running]:
    inbox_send, inbox_recv = trio.open_memory_channel[ConfigMsg](4)
    desired_send, desired_recv = trio.open_memory_channel[BackendsMsg](16)
    actor = ConfigActor(
        inbox_recv,
        load=load,
        current=Cell(load()),
        backends=desired_send,
        watch_interval=1.0 if files is not None else None,
        quiet=0.3,
        stat=files.stat if files is not None else (lambda _path: None),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        yield Running(actor=actor, inbox=inbox_send, desired=desired_recv)
        nursery.cancel_scope.cancel()


async def test_start_sends_the_desired_set_once() -> None:
    load = Loader(config("a", "b"))
    async with running(load) as run:
        await trio.testing.wait_all_tasks_blocked()
        assert [list(d.specs) for d in run.sent()] == [["a", "b"]]


async def test_a_good_reload_sends_one_desired_set() -> None:
    load = Loader(config("a"))
    async with running(load) as run:
        run.sent()
        load.result = config("a", "b", args=("--new",))
        await run.inbox.send(Reload(reason="test"))
        await trio.testing.wait_all_tasks_blocked()
        sent = run.sent()
        assert len(sent) == 1
        assert sent[0].specs == load.result.servers
        assert run.actor.current.value is load.result
        assert run.actor.reload_error is None


async def test_a_broken_reload_sends_nothing_and_records_the_error() -> None:
    good = config("a")
    load = Loader(good)
    async with running(load) as run:
        run.sent()
        load.result = ConfigError(str(CONFIG), ("expected an integer, got 'five' @ servers.a.max_restarts",))
        with structlog.testing.capture_logs() as logs:
            await run.inbox.send(Reload(reason="test"))
            await trio.testing.wait_all_tasks_blocked()
        assert run.sent() == []
        assert run.actor.current.value is good  # the old config stays in force
        assert run.actor.reload_error == f"{CONFIG}: expected an integer, got 'five' @ servers.a.max_restarts"
        failed = [e for e in logs if e["event"] == "config_reload_failed"]
        assert len(failed) == 1
        assert "servers.a.max_restarts" in failed[0]["error"]

        # the next good save applies, and clears the error
        load.result = config("a", "c")
        await run.inbox.send(Reload(reason="test"))
        await trio.testing.wait_all_tasks_blocked()
        assert [list(d.specs) for d in run.sent()] == [["a", "c"]]
        assert run.actor.reload_error is None


async def test_a_burst_of_file_changes_makes_one_reload(autojump_clock: trio.testing.MockClock) -> None:
    files = FakeFiles()
    files.write(CONFIG)
    load = Loader(config("a"))
    async with running(load, files) as run:
        run.sent()
        calls = load.calls
        await trio.sleep(5)
        assert load.calls == calls  # nothing changed, nothing reloaded
        load.result = config("a", "b")
        for size in range(8):  # an editor saving in several writes
            files.write(CONFIG, size=size)
            await trio.sleep(0.1)
        await trio.sleep(10)
        assert load.calls == calls + 1
        assert [list(d.specs) for d in run.sent()] == [["a", "b"]]


async def test_a_would_be_file_appearing_reloads(autojump_clock: trio.testing.MockClock) -> None:
    files = FakeFiles()
    files.write(CONFIG)
    load = Loader(config("a"))
    async with running(load, files) as run:
        run.sent()
        load.result = config("a", "from-dotenv")
        files.write(DOTENV)  # $ASSERN_HOME/.env did not exist; now it does
        await trio.sleep(5)
        assert [list(d.specs) for d in run.sent()] == [["a", "from-dotenv"]]


async def test_a_broken_file_is_watched_until_it_is_fixed(autojump_clock: trio.testing.MockClock) -> None:
    """The broken file may be new to the config (a new include): fixing it must reload."""
    files = FakeFiles()
    files.write(CONFIG)
    files.write(LOCAL)
    load = Loader(config("a"))
    async with running(load, files) as run:
        run.sent()
        load.result = ConfigError(str(LOCAL), ("invalid TOML: Invalid value (at line 1, column 5)",))
        files.write(CONFIG, size=1)
        await trio.sleep(5)
        assert run.sent() == []
        failed = run.actor.reload_error
        assert failed is not None
        assert LOCAL in run.actor.watched()

        load.result = config("a", "fixed")
        files.write(LOCAL, size=9)  # only the broken file changes
        await trio.sleep(5)
        assert [list(d.specs) for d in run.sent()] == [["a", "fixed"]]
        assert run.actor.reload_error is None
        assert LOCAL not in run.actor.watched()


async def test_reload_errors_and_logs_carry_no_secret(world: World) -> None:
    """A broken env table is reported by key path and kind, never by the value written."""
    secret = "sk-live-0123456789abcdef"
    world.global_config(f'[servers.s]\ncommand = "s"\nenv = {{ TOKEN = "{secret}" }}\n')

    def load() -> ResolvedConfig:
        return world.resolve()

    async with running(load) as run:
        run.sent()
        broken = [
            f'[servers.s]\ncommand = "s"\nenv = "TOKEN={secret}"\n',
            f'[servers.s]\ncommand = "s"\nenv = {{ TOKEN = "{secret}${{OOPS" }}\n',
            f'[servers.s]\ncommand = "s"\nheaders = {{ A = ["{secret}"] }}\n',
        ]
        for text in broken:
            world.global_config(text)
            with structlog.testing.capture_logs() as logs:
                await run.inbox.send(Reload(reason="test"))
                await trio.testing.wait_all_tasks_blocked()
            assert run.actor.reload_error is not None
            assert "servers.s" in run.actor.reload_error
            assert secret not in run.actor.reload_error
            assert logs
            assert secret not in repr(logs)
        assert run.sent() == []


async def test_watching_can_be_turned_off() -> None:
    load = Loader(config("a"))
    inbox_send, inbox_recv = trio.open_memory_channel[ConfigMsg](1)
    desired_send, _desired_recv = trio.open_memory_channel[BackendsMsg](4)
    stats: list[Path] = []
    actor = ConfigActor(
        inbox_recv,
        load=load,
        current=Cell(load()),
        backends=desired_send,
        watch_interval=None,
        stat=lambda path: stats.append(path),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert stats == []
    inbox_send.close()


async def test_an_unexpected_error_in_loading_is_a_failed_reload_not_a_crash() -> None:
    """Crashing would restart every backend (rest_for_one); the old config stays instead."""
    good = config("a")
    calls = 0

    def load() -> ResolvedConfig:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise KeyError("sk-live-secret-in-a-message")
        return good

    async with running(load) as run:
        run.sent()
        with structlog.testing.capture_logs() as logs:
            await run.inbox.send(Reload(reason="test"))
            await trio.testing.wait_all_tasks_blocked()
        assert run.sent() == []
        assert run.actor.current.value is good
        assert run.actor.reload_error == "internal error while reloading (KeyError); please report it"
        assert [e["event"] for e in logs] == ["config_reload_failed"]
        assert "sk-live" not in repr(logs)


async def test_a_grant_reloads_and_the_folders_servers_start(
    world: World, autojump_clock: trio.testing.MockClock
) -> None:
    """The trust store is watched: trusting the folder (a write of the store) applies it,
    and an edit of the trusted file after that takes the folder's server away again."""
    world.global_config('[servers.mine]\ncommand = "mine"\n')
    world.write("repo/.assern/config.toml", '[servers.build]\ncommand = "sh"\n')
    repo = world.home / "repo"

    def load() -> ResolvedConfig:
        return world.resolve(cwd="repo", trusted=False)

    files = FakeFiles()
    for path in (world.assern_home / "config.toml", repo / ".assern" / "config.toml"):
        files.write(path)
    async with running(load, files) as run:
        assert [list(d.specs) for d in run.sent()] == [["mine"]]
        store = world.assern_home / "trust.json"
        assert store in run.actor.watched()
        with structlog.testing.capture_logs() as logs:
            world.trust(repo)
            files.write(store)
            await trio.sleep(5)
        assert [list(d.specs) for d in run.sent()] == [["mine", "build"]]
        assert not [e for e in logs if e["event"] == "project_untrusted"]

        world.write("repo/.assern/config.toml", '[servers.build]\ncommand = "curl"\n')
        with structlog.testing.capture_logs() as logs:
            files.write(repo / ".assern" / "config.toml", size=1)
            await trio.sleep(5)
        assert [list(d.specs) for d in run.sent()] == [["mine"]]
        (untrusted,) = [e for e in logs if e["event"] == "project_untrusted"]
        assert untrusted["folder"] == str(repo)
        assert untrusted["reason"] == "changed"
        assert untrusted["command"] == f"assernctl trust {repo}"
