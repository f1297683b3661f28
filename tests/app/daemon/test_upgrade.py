"""Which client replaces the running daemon: a newer version does, an older one joins,
and the same version only when its files changed after the daemon started."""

from __future__ import annotations

import pytest

from assern.app.daemon.upgrade import should_supersede, supersede_argv, version_key, wait_for_successor


@pytest.mark.parametrize(
    ("lower", "higher"),
    [("0.1.0", "0.1.1"), ("0.1.9", "0.1.10"), ("0.9", "1.0"), ("1.0.0rc1", "1.0.0rc2"), ("1.0", "1.0.1")],
)
def test_versions_compare_by_their_numbers(lower: str, higher: str) -> None:
    assert version_key(lower) < version_key(higher)


def never() -> int:
    raise AssertionError("the files are looked at only for the same version")


def test_the_same_build_never_supersedes() -> None:
    assert not should_supersede("0.1.0+aaa", "0.1.0+aaa", their_started_at=0.0, newest_ns=never)


def test_a_newer_version_supersedes_and_an_older_one_joins() -> None:
    assert should_supersede("0.2.0+aaa", "0.1.0+bbb", their_started_at=None, newest_ns=never)
    assert not should_supersede("0.1.0+aaa", "0.2.0+bbb", their_started_at=None, newest_ns=never)


def test_the_same_version_supersedes_only_when_its_files_changed_after_the_daemon_started() -> None:
    started = 1_000.0
    later, earlier = 1_001 * 10**9, 999 * 10**9
    assert should_supersede("0.1.0+aaa", "0.1.0+bbb", their_started_at=started, newest_ns=lambda: later)
    assert not should_supersede("0.1.0+aaa", "0.1.0+bbb", their_started_at=started, newest_ns=lambda: earlier)
    # a daemon that does not say when it started is left alone
    assert not should_supersede("0.1.0+aaa", "0.1.0+bbb", their_started_at=None, newest_ns=never)


def test_the_successor_replaces_only_the_build_it_met() -> None:
    assert supersede_argv(["py", "-m", "assern.app.quick", "daemon"], "0.1.0+aaa") == [
        "py",
        "-m",
        "assern.app.quick",
        "daemon",
        "--supersede",
        "0.1.0+aaa",
    ]


def test_waiting_for_the_successor_ends_when_another_daemon_answers_or_after_its_bound() -> None:
    answers = iter([None, {"build": "old", "pid": 1}, {"build": "new", "pid": 2}])
    assert wait_for_successor(lambda: next(answers), 1, timeout=30) == {"build": "new", "pid": 2}
    assert wait_for_successor(lambda: {"build": "old", "pid": 1}, 1, timeout=0.05) is None
    # another client's daemon, of a third build, took the sockets over first: met as well
    assert wait_for_successor(lambda: {"build": "other", "pid": 3}, 1, timeout=30) == {
        "build": "other",
        "pid": 3,
    }


def test_the_same_build_under_another_interpreter_supersedes_only_when_that_is_newer() -> None:
    later, earlier = 1_001 * 10**9, 999 * 10**9

    def supersedes(newest: int) -> bool:
        build = "0.1.0+aaa"
        return should_supersede(
            build, build, their_started_at=1_000.0, same_interpreter=False, newest_ns=lambda: newest
        )

    assert supersedes(later)
    assert not supersedes(earlier)
