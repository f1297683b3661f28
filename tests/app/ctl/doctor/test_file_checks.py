"""run.private and home.private: the socket folder and what is in it, ASSERN_HOME and the
configuration files, judged from their `stat`."""

from __future__ import annotations

from pathlib import Path

from doctor_facts import HOME, RUN, UID, facts, lines

from assern.app.ctl.doctor.checks.files import home_private, run_private
from assern.app.ctl.doctor.facts import PathFact, PathKind
from assern.app.ctl.doctor.finding import Status


def fact(path: Path, kind: PathKind = "folder", mode: int = 0o700, uid: int = UID) -> PathFact:
    return PathFact(path=path, kind=kind, uid=uid, mode=mode)


SOCKET = fact(RUN / "assern.sock", "socket", 0o600)
CONTROL = fact(RUN / "assern.ctl", "socket", 0o600)
LOCK = fact(RUN / "assern.lock", "file", 0o600)


def test_a_private_socket_folder_is_one_ok_line() -> None:
    found = run_private(facts(run_paths=(fact(RUN), SOCKET, CONTROL, LOCK)))
    assert lines(found) == [
        ("ok", "run.private", f"{RUN}: yours, 0700; 3 socket(s), lock(s) and hint(s), all 0600")
    ]


def test_a_folder_not_made_yet_is_fine() -> None:
    found = run_private(facts(run_paths=(PathFact(path=RUN, kind="missing"),)))
    assert lines(found) == [
        ("ok", "run.private", f"{RUN} does not exist yet; the first start creates it (0700)")
    ]


def test_no_folder_short_enough_fails_with_a_shorter_home() -> None:
    found = run_private(facts(run_dir=None, run_dir_error="socket paths under /x exceed the limit"))
    assert [(f.status, f.summary, f.fix) for f in found] == [
        (Status.FAIL, "socket paths under /x exceed the limit", "export ASSERN_HOME=$HOME/.assern")
    ]


def test_each_thing_at_fault_has_its_own_line_and_fix() -> None:
    found = run_private(
        facts(
            run_paths=(
                fact(RUN, mode=0o755),
                fact(RUN / "assern.sock", "socket", 0o666),
                fact(RUN / "work.ctl", "socket", 0o600, uid=0),
                fact(RUN / "odd.sock", "link", 0o777),
                PathFact(path=RUN / "hints", kind="unreadable", error="Permission denied"),
            )
        )
    )
    assert [(f.status.value, f.summary, f.fix) for f in found] == [
        ("warn", f"{RUN} is 0755, not 0700 (the next start tightens it)", f"chmod 700 {RUN}"),
        ("warn", f"{RUN}/assern.sock is 0666, not 0600", f"chmod 600 {RUN}/assern.sock"),
        ("fail", f"{RUN}/work.ctl belongs to uid 0, not to you (uid {UID})", f"rm -f {RUN}/work.ctl"),
        ("fail", f"{RUN}/odd.sock is a symlink; sockets are never reached through one", f"rm {RUN}/odd.sock"),
        ("warn", f"cannot look at {RUN}/hints: Permission denied", f"ls -ld {RUN}/hints"),
    ]


def test_a_socket_folder_of_another_user_fails_with_chown() -> None:
    found = run_private(facts(run_paths=(fact(RUN, uid=0),)))
    assert found[0].status is Status.FAIL
    assert found[0].fix == f'sudo chown -R "$(id -un)" {RUN}'


def test_a_folder_that_is_a_symlink_or_a_file_is_refused() -> None:
    assert run_private(facts(run_paths=(fact(RUN, "link", 0o777),)))[0].status is Status.FAIL
    fifo = run_private(facts(run_paths=(fact(RUN), fact(RUN / "x.sock", "other", 0o600))))
    assert lines(fifo) == [("fail", "run.private", f"{RUN}/x.sock is neither a folder, a file nor a socket")]


def test_paths_with_spaces_are_quoted_in_the_fix() -> None:
    odd = Path("/home/me/my files/run")
    found = run_private(facts(run_dir=odd, run_paths=(fact(odd, mode=0o750),)))
    assert found[0].fix == "chmod 700 '/home/me/my files/run'"


CONFIG = HOME / "config.toml"
DOTENV = HOME / ".env"


def test_home_and_configuration_files_of_ours_not_writable_by_others_pass() -> None:
    found = home_private(
        facts(home_paths=(fact(HOME, mode=0o755), fact(CONFIG, "file", 0o644), fact(DOTENV, "file", 0o600)))
    )
    assert lines(found) == [
        ("ok", "home.private", f"{HOME} and 2 configuration file(s): yours, not writable by others")
    ]
    missing = home_private(facts(home_paths=(PathFact(path=HOME, kind="missing"),)))
    assert lines(missing) == [
        ("ok", "home.private", f"{HOME} does not exist yet; the first start creates it")
    ]


def test_what_others_may_write_or_read_is_found() -> None:
    found = home_private(
        facts(
            home_paths=(
                fact(HOME, mode=0o777),
                fact(CONFIG, "file", 0o664, uid=0),
                fact(DOTENV, "file", 0o644),
            )
        )
    )
    assert [(f.status.value, f.summary, f.fix) for f in found] == [
        ("fail", f"{HOME} is 0777: others may change what assern runs", f"chmod go-w {HOME}"),
        ("fail", f"{CONFIG} is 0664: others may change what assern runs", f"chmod go-w {CONFIG}"),
        ("warn", f"{DOTENV} is 0644: others may read its secrets", f"chmod 600 {DOTENV}"),
    ]


def test_a_group_of_our_own_gives_nobody_else_access() -> None:
    group_ours = (
        PathFact(path=HOME, kind="folder", uid=UID, gid=UID, mode=0o775),
        PathFact(path=CONFIG, kind="file", uid=UID, gid=UID, mode=0o664),
        PathFact(path=DOTENV, kind="file", uid=UID, gid=UID, mode=0o640),
    )
    assert [f.status for f in home_private(facts(home_paths=group_ours, own_group=UID))] == [Status.OK]
    shared = home_private(facts(home_paths=group_ours, own_group=None))
    assert [(f.status.value, f.summary) for f in shared] == [
        ("fail", f"{HOME} is 0775: others may change what assern runs"),
        ("fail", f"{CONFIG} is 0664: others may change what assern runs"),
        ("warn", f"{DOTENV} is 0640: others may read its secrets"),
    ]
    world = (PathFact(path=HOME, kind="folder", uid=UID, gid=UID, mode=0o777),)
    assert home_private(facts(home_paths=world, own_group=UID))[0].status is Status.FAIL


def test_a_home_of_another_user_fails() -> None:
    found = home_private(facts(home_paths=(fact(HOME, uid=0),)))
    assert lines(found) == [("fail", "home.private", f"{HOME} belongs to uid 0, not to you (uid {UID})")]
    assert home_private(facts(home_paths=())) == []
