"""Instance identity, socket names and the small filesystem pieces of instance sharing."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from assern.actors.config.resolve import resolve_config
from assern.actors.config.spec import Provenance, ResolvedConfig, ServerSpec, Settings
from assern.app.instance import (
    LONGEST_NAME,
    InstanceError,
    InstanceLock,
    Liveness,
    Slot,
    candidate_slots,
    ensure_private_dir,
    fallback_directories,
    fingerprint,
    fits,
    home_slot,
    lock_path,
    own_slot,
    probe,
    sharing_enabled,
    slot_names,
    socket_directory,
    stem_for,
    sun_path_max,
)


def spec(name: str = "alpha", **changes: object) -> ServerSpec:
    fields: dict[str, object] = {"name": name, "transport": "stdio", "command": "run-" + name}
    fields.update(changes)
    return ServerSpec(**fields)  # type: ignore[arg-type]  # each field a test sets has its own type


def config(*servers: ServerSpec, project: str | None = None, files: tuple[Path, ...] = ()) -> ResolvedConfig:
    return ResolvedConfig(
        settings=Settings(), servers={s.name: s for s in servers}, project=project, files=files
    )


CONFIG_ENV = Provenance(layer="global-config", file="/c.toml")


# ------------------------------------------------------------------ identity


def test_the_fingerprint_is_stable_and_follows_what_the_configuration_says() -> None:
    base = config(spec(env={"TOKEN": "a", "PATH": "/bin"}, env_keys_from={"TOKEN": CONFIG_ENV}))
    assert fingerprint(base) == fingerprint(
        config(spec(env={"TOKEN": "a", "PATH": "/bin"}, env_keys_from={"TOKEN": CONFIG_ENV}))
    )
    assert len(fingerprint(base)) == 64
    different = [
        config(spec(env={"TOKEN": "b", "PATH": "/bin"}, env_keys_from={"TOKEN": CONFIG_ENV})),
        config(spec(env={"TOKEN": "a"}, env_keys_from={"TOKEN": CONFIG_ENV}, args=("--x",))),
        config(spec(env={"TOKEN": "a"}, env_keys_from={"TOKEN": CONFIG_ENV}), project="work"),
        config(spec(env={"TOKEN": "a"}, env_keys_from={"TOKEN": CONFIG_ENV}), files=(Path("/other.toml"),)),
        config(spec(env={"TOKEN": "a"}, env_keys_from={"TOKEN": CONFIG_ENV}), spec("beta")),
        config(spec(env={"TOKEN": "a"}, env_keys_from={"TOKEN": CONFIG_ENV}, allowed=("echo",))),
    ]
    assert len({fingerprint(c) for c in different} | {fingerprint(base)}) == len(different) + 1


def test_the_inherited_environment_is_not_part_of_the_identity() -> None:
    one = config(spec(env={"TOKEN": "a", "PWD": "/x", "TERM": "xterm"}, env_keys_from={"TOKEN": CONFIG_ENV}))
    two = config(spec(env={"TOKEN": "a", "PWD": "/y", "SHLVL": "3"}, env_keys_from={"TOKEN": CONFIG_ENV}))
    assert fingerprint(one) == fingerprint(two)


def test_two_shells_share_an_instance_unless_a_referenced_variable_differs(tmp_path: Path) -> None:
    home = tmp_path / "assern"
    home.mkdir()
    (home / "config.toml").write_text(
        '[servers.gh]\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "${TOKEN}" }\n'
    )

    def digest(**environ: str) -> str:
        env = {"HOME": str(tmp_path), **environ}
        return fingerprint(
            resolve_config(config_path=None, project=None, cwd=tmp_path, environ=env, assern_home=home)
        )

    assert digest(TOKEN="t1", PWD="/a", TERM="xterm") == digest(TOKEN="t1", PWD="/b", SHLVL="2")
    assert digest(TOKEN="t1") != digest(TOKEN="t2")


# --------------------------------------------------------------------- names


def test_stems_are_the_project_or_a_safe_hashed_form() -> None:
    assert stem_for(None) == "assern"
    assert stem_for("work") == "work"
    assert stem_for("my-app.v2") == "my-app.v2"
    odd = stem_for("clients/acme corp")
    assert odd.startswith("clients_acme_corp~")
    assert odd != stem_for("clients_acme corp")
    long = stem_for("x" * 100)
    assert len(long) <= 32
    assert long != stem_for("x" * 101)
    assert "/" not in stem_for("../../etc")
    assert not stem_for(".hidden").startswith(".")


def test_slots_name_the_mcp_and_control_sockets(tmp_path: Path) -> None:
    digest = "3f9a0c1b2d4e" + "0" * 52
    assert home_slot(tmp_path, None).mcp == tmp_path / "assern.sock"
    assert home_slot(tmp_path, None).control == tmp_path / "assern.ctl"
    assert home_slot(tmp_path, "work").mcp == tmp_path / "work.sock"
    assert own_slot(tmp_path, "work", digest) == Slot(tmp_path, "work-3f9a0c1b2d4e")
    assert own_slot(tmp_path, None, digest).mcp.name == "assern-3f9a0c1b2d4e.sock"
    assert lock_path(tmp_path, "work") == tmp_path / "work.lock"


def test_candidate_slots_are_home_own_then_other_slots_of_the_stem(tmp_path: Path) -> None:
    digest = "a" * 64
    existing = ["work.sock", "work.ctl", "work-bbbbbbbbbbbb.ctl", "work-bbbbbbbbbbbb.sock", "workshop.ctl"]
    existing += ["work.lock", "pids", "other-cccccccccccc.ctl"]
    names = [slot.name for slot in candidate_slots(tmp_path, "work", digest, existing)]
    assert names == ["work", "work-aaaaaaaaaaaa", "work-bbbbbbbbbbbb"]
    assert slot_names(existing) == ["other-cccccccccccc", "work", "work-bbbbbbbbbbbb", "workshop"]


def test_different_configs_never_share_a_socket_name(tmp_path: Path) -> None:
    a = fingerprint(config(spec("alpha")))
    b = fingerprint(config(spec("beta")))
    assert own_slot(tmp_path, None, a) != own_slot(tmp_path, None, b)
    assert home_slot(tmp_path, "one") != home_slot(tmp_path, "two")


# ----------------------------------------------------------------- directory


def test_socket_paths_have_a_platform_limit() -> None:
    assert sun_path_max("linux") == 108
    assert sun_path_max("darwin") == 104
    assert fits(Path("/" + "x" * 106), "linux")
    assert not fits(Path("/" + "x" * 107), "linux")
    assert not fits(Path("/" + "x" * 103), "darwin")


def test_a_long_assern_home_falls_back_to_a_short_runtime_folder(tmp_path: Path) -> None:
    short = Path("/home/u/.valksor/assern")
    assert socket_directory(short, {}, uid=1000).path == short / "run"
    assert not socket_directory(short, {}, uid=1000).fallback

    long = Path("/home/u/" + "deep/" * 20 + "assern")
    chosen = socket_directory(long, {"XDG_RUNTIME_DIR": "/run/user/1000"}, uid=1000)
    assert chosen.fallback
    assert chosen.path.parent == Path("/run/user/1000")
    assert chosen.path.name.startswith("assern-")
    assert fits(chosen.path / LONGEST_NAME)
    without_runtime = socket_directory(long, {}, uid=1000)
    assert without_runtime.path.parent == Path("/tmp/assern-1000")
    # Distinct homes get distinct folders.
    assert socket_directory(Path(str(long) + "2"), {}, uid=1000).path != without_runtime.path
    assert fallback_directories(long, {"XDG_RUNTIME_DIR": "relative"}, 1)[0].parent == Path("/tmp/assern-1")


def test_no_short_folder_is_an_error_not_silence() -> None:
    long = Path("/h/" + "deep/" * 30)
    with pytest.raises(InstanceError, match="exceed the platform limit"):
        socket_directory(long, {"XDG_RUNTIME_DIR": "/r" * 60}, uid=10**80)


def test_private_folders_are_created_0700_and_tightened(tmp_path: Path) -> None:
    made = tmp_path / "run"
    ensure_private_dir(made)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    made.chmod(0o755)
    ensure_private_dir(made)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_a_symlink_or_a_foreign_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(InstanceError, match="not a plain folder"):
        ensure_private_dir(link)
    with pytest.raises(InstanceError, match="belongs to uid"):
        ensure_private_dir(target, uid=os.getuid() + 1)


def test_sharing_is_on_unless_turned_off() -> None:
    assert sharing_enabled({})
    assert sharing_enabled({"ASSERN_NO_INSTANCE_SHARING": "0"})
    assert not sharing_enabled({"ASSERN_NO_INSTANCE_SHARING": "1"})
    assert not sharing_enabled({"ASSERN_NO_INSTANCE_SHARING": "yes"})


# ------------------------------------------------------------- lock, probe


def test_the_instance_lock_is_exclusive_until_released(tmp_path: Path) -> None:
    path = tmp_path / "assern.lock"
    first, second = InstanceLock(path), InstanceLock(path)
    assert first.try_acquire()
    assert not second.try_acquire()
    with pytest.raises(InstanceError, match="held"):
        second.acquire(timeout=0.05)
    first.release()
    second.acquire(timeout=1)
    assert second.held
    second.release()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_probe_tells_live_stale_and_absent_sockets_apart(tmp_path: Path) -> None:
    path = tmp_path / "x.sock"
    assert probe(path) is Liveness.ABSENT
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    try:
        assert probe(path) is Liveness.LIVE
    finally:
        listener.close()
    assert path.exists()
    assert probe(path) is Liveness.STALE  # the file stayed, nobody listens
    plain = tmp_path / "plain.sock"
    plain.write_text("not a socket")
    assert probe(plain) is Liveness.STALE
