"""Trust: the digest of what runs, the store (read, checked, written under a lock), the decision."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from assern.actors.config.trust import (
    TRUST_LOCK,
    ProjectFiles,
    Table,
    TrustRecord,
    TrustStore,
    TrustStoreError,
    assess,
    grant,
    project_files,
    read_store,
    revoke,
    store_lock,
    update_store,
)

FOLDER = "/home/u/repo"
CONFIG = f"{FOLDER}/.assern/config.toml"
NOW = "2026-01-01T00:00:00+00:00"


def build(**fields: object) -> ProjectFiles:
    table: dict[str, object] = {
        "command": "sh",
        "args": ("-c", "touch MARKER"),
        "env": {"TOKEN": "one"},
        "root": None,
    }
    table.update(fields)
    return project_files(
        FOLDER,
        files=(Path(CONFIG),),
        servers={"build": [Table(fields=table, file=CONFIG)]},
        dotenv={"API": "1"},
        dotenv_file=f"{FOLDER}/.assern/.env",
    )


def store_of(*projects: ProjectFiles, path: Path = Path("/s/trust.json")) -> TrustStore:
    return TrustStore(path=path, records={p.folder: TrustRecord.granting(p, now=NOW) for p in projects})


# ------------------------------------------------------------------ the digest


def test_the_digest_covers_what_runs() -> None:
    base = build()
    for change in (
        {"command": "bash"},
        {"args": ("-c", "touch OTHER")},
        {"env": {"TOKEN": "two"}},
        {"cwd": "/tmp"},
        {"root": "/"},
        {"url": "http://x"},
        {"headers": {"Authorization": "b"}},
    ):
        assert build(**change).digest != base.digest, change


def test_the_digest_ignores_how_the_fields_are_ordered() -> None:
    one = project_files(
        FOLDER,
        files=(Path(CONFIG),),
        servers={
            "a": [Table(fields={"command": "a", "env": {"X": "1", "Y": "2"}}, file=CONFIG)],
            "b": [Table(fields={"command": "b"}, file=CONFIG)],
        },
    )
    two = project_files(
        FOLDER,
        files=(Path(CONFIG),),
        servers={
            "b": [Table(fields={"command": "b"}, file=CONFIG)],
            "a": [Table(fields={"env": {"Y": "2", "X": "1"}, "command": "a"}, file=CONFIG)],
        },
    )
    assert one.digest == two.digest


def test_a_file_read_from_elsewhere_is_a_change() -> None:
    """A symlinked `.assern/` pointing at another folder: the same text, another file."""
    here = build()
    elsewhere = project_files(
        FOLDER,
        files=(Path(CONFIG),),
        servers={"build": [Table(fields=dict(here.servers["build"].to_json()), file="/other/config.toml")]},
    )
    assert elsewhere.digest != here.digest


def test_env_values_are_in_the_digest_never_in_the_sketch() -> None:
    project = build(env={"TOKEN": "s3cret"})
    assert "s3cret" not in json.dumps(project.servers["build"].to_json())
    assert "s3cret" not in "\n".join(project.describe())
    assert project.servers["build"].env_keys == ("TOKEN",)


def test_the_sketch_shows_command_args_env_keys_cwd_and_root() -> None:
    project = build(cwd="sub", root="~", env={"B": "1", "A": "2"})
    assert project.describe() == [
        "  files: .assern/config.toml",
        "  server build: sh -c 'touch MARKER'; env A, B; cwd sub; root ~",
        "  .env (given to every server): API",
    ]


# ------------------------------------------------------------------ the decision


def test_trusted_only_with_the_same_digest_at_the_same_folder() -> None:
    project = build()
    assert assess([project], store_of(project)).trusted == (FOLDER,)
    assert assess([project], store_of()).untrusted[0].reason == "new"


def test_a_moved_folder_is_not_trusted_at_its_new_path() -> None:
    trusted = build()
    moved = project_files(
        "/home/u/renamed",
        files=(Path("/home/u/renamed/.assern/config.toml"),),
        servers={"build": [Table(fields={"command": "sh"}, file="/home/u/renamed/.assern/config.toml")]},
    )
    report = assess([moved], store_of(trusted))
    assert report.trusted == ()
    assert [item.reason for item in report.untrusted] == ["new"]


def test_changed_content_is_untrusted_and_says_what_changed() -> None:
    report = assess([build(args=("-c", "touch NEW"))], store_of(build()))
    (untrusted,) = report.untrusted
    assert untrusted.reason == "changed"
    assert untrusted.changes == ("~ server build: args -c 'touch MARKER' -> -c 'touch NEW'",)


def test_added_and_removed_servers_and_env_values_in_the_difference() -> None:
    before = build()
    after = project_files(
        FOLDER,
        files=(Path(CONFIG),),
        servers={"new": [Table(fields={"command": "curl", "args": ("x",)}, file=CONFIG)]},
        dotenv={"API": "2"},
        dotenv_file=f"{FOLDER}/.assern/.env",
    )
    (untrusted,) = assess([after], store_of(before)).untrusted
    assert untrusted.changes == ("+ server new: curl x", "- server build", "~ .env: values changed")


def test_a_value_change_is_named_without_the_value() -> None:
    (untrusted,) = assess([build(env={"TOKEN": "two"})], store_of(build())).untrusted
    assert untrusted.changes == ("~ server build: env or header values, or other fields, changed",)


def test_an_unusable_store_trusts_nothing_and_says_so() -> None:
    project = build()
    store = TrustStore(path=Path("/s/trust.json"), records=store_of(project).records, problem="it is corrupt")
    report = assess([project], store)
    assert report.trusted == ()
    assert report.untrusted[0].reason == "store"
    assert report.lines()[0].startswith("the trust store /s/trust.json is ignored: it is corrupt;")


def test_the_line_names_the_folder_what_waits_and_the_command() -> None:
    (untrusted,) = assess([build()], store_of()).untrusted
    assert untrusted.line() == (
        "/home/u/repo: 1 server(s) from .assern/config.toml not started: this folder's configuration "
        "is not trusted; review and allow with `assernctl trust /home/u/repo`"
    )


def test_the_report_watches_the_store_and_the_waiting_files() -> None:
    report = assess([build()], store_of())
    assert report.watched == (Path("/s/trust.json"), Path(CONFIG))
    assert assess([], store_of()).watched == ()  # no folder's files: the store does not matter


# ------------------------------------------------------------------ the store


def test_grant_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    project = build()
    grant(path, [project], now=NOW)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store = read_store(path)
    assert store.problem is None
    assert store.records[FOLDER] == TrustRecord.granting(project, now=NOW)
    assert assess([project], store).trusted == (FOLDER,)


def test_revoke_removes_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    grant(path, [build()], now=NOW)
    assert revoke(path, ["/elsewhere"]) == []
    assert revoke(path, [FOLDER, FOLDER]) == [FOLDER]
    assert read_store(path).records == {}


def test_an_absent_store_is_empty(tmp_path: Path) -> None:
    assert read_store(tmp_path / "trust.json") == TrustStore(path=tmp_path / "trust.json")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "it is not valid JSON"),
        ('{"format": 9, "folders": {}}', "it is not a trust store of format 1"),
        ('{"format": 1, "folders": []}', "its 'folders' is not a JSON object"),
        ('{"format": 1, "folders": {"/r": {"trusted_at": "x"}}}', "the record of /r has no digest"),
        (
            '{"format": 1, "folders": {"/r": {"digest": "d", "servers": {"s": {"args": "x"}}}}}',
            "the record of /r: expected a list of strings, got 'x'",
        ),
    ],
)
def test_a_corrupt_store_is_ignored_and_kept(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "trust.json"
    path.write_text(text)
    path.chmod(0o600)
    store = read_store(path)
    assert store.records == {}
    assert store.problem is not None
    assert store.problem.startswith(problem)
    with pytest.raises(TrustStoreError, match="it is left as it is"):
        grant(path, [build()], now=NOW)
    assert path.read_text() == text  # nothing lost: the user decides what to do with it


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_a_store_others_may_write_is_ignored(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "trust.json"
    grant(path, [build()], now=NOW)
    path.chmod(mode)
    store = read_store(path)
    assert store.records == {}
    assert store.problem == f"others may write it (mode {mode:04o}; it must be 0600)"


def test_a_store_of_another_user_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    grant(path, [build()], now=NOW)
    try:
        os.chown(path, os.getuid() + 1, -1)
    except PermissionError:
        pytest.skip("changing a file's owner needs root")
    store = read_store(path)
    assert store.records == {}
    assert store.problem == f"it is owned by another user (uid {os.getuid() + 1})"


def test_a_symlinked_store_is_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    grant(real, [build()], now=NOW)
    (tmp_path / "trust.json").symlink_to(real)
    store = read_store(tmp_path / "trust.json")
    assert store.records == {}
    assert store.problem == "it is a symbolic link"


def test_a_change_holds_the_lock(tmp_path: Path) -> None:
    """While one grant reads and writes the store, another cannot take the lock."""
    path = tmp_path / "trust.json"
    seen: list[bool] = []

    def change(records: dict[str, TrustRecord]) -> dict[str, TrustRecord]:
        fd = os.open(tmp_path / TRUST_LOCK, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append(False)
        except BlockingIOError:
            seen.append(True)
        finally:
            os.close(fd)
        return records

    update_store(path, change)
    assert seen == [True]
    with store_lock(path):  # and it is released after
        pass


def test_concurrent_grants_lose_nothing(tmp_path: Path) -> None:
    """Grants from many terminals at once: every folder ends up in the store."""
    path = tmp_path / "trust.json"
    folders = [f"/home/u/repo{index}" for index in range(12)]
    start = threading.Barrier(len(folders))
    errors: list[BaseException] = []

    def one(folder: str) -> None:
        project = project_files(
            folder, files=(Path(folder) / "c",), servers={"s": [Table(fields={"command": "x"}, file="c")]}
        )
        start.wait()
        try:
            grant(path, [project], now=NOW)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(folder,)) for folder in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(read_store(path).records) == sorted(folders)
