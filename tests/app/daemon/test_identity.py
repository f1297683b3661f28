"""The build id: the version and a digest of the package's shipped files, the same for the
same files wherever they are, another for one changed byte; its cache hit, missed,
corrupt or unwritable."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from assern.actors.identity import __version__
from assern.app.daemon import identity
from assern.app.daemon.identity import PACKAGE_ROOT, build_id, cache_file, package_files

BUILD = re.compile(r"^(?P<version>[^+]+)\+(?P<digest>[0-9a-f]{12})$")


def make_install(root: Path) -> Path:
    """A small install: package folders with code and data, and what does not ship."""
    files = {
        "app/__init__.py": "",
        "app/quick.py": "print('quick')\n",
        "actors/identity.py": "__version__ = '0.1.0'\n",
        "actors/listener/page/static/page.css": "body { margin: 0 }\n",
        "examples/default.toml": "[servers]\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def build(root: Path, home: Path | None = None) -> str:
    return build_id(str(home) if home else None, root=str(root), version="0.1.0")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An `$ASSERN_HOME` that exists (a cache is never the reason one is made)."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def test_a_build_id_is_the_version_and_twelve_hex_digits(tmp_path: Path) -> None:
    match = BUILD.match(build(make_install(tmp_path / "i")))
    assert match is not None
    assert match["version"] == "0.1.0"


def test_this_install_has_one_build_id_with_or_without_its_cache(tmp_path: Path) -> None:
    found = build_id(None)
    assert BUILD.match(found) is not None
    assert found.startswith(f"{__version__}+")
    assert build_id(str(tmp_path)) == found
    assert build_id(str(tmp_path)) == found  # from the cache now
    assert list((tmp_path / "cache" / "build").iterdir())
    assert {relative.split("/")[0] for (relative, *_), _ in package_files(PACKAGE_ROOT)} >= {
        "app",
        "actors",
        "supervisor",
    }


def test_the_same_files_in_another_folder_give_the_same_id(tmp_path: Path) -> None:
    first = make_install(tmp_path / "one")
    second = tmp_path / "two"
    shutil.copytree(first, second)
    assert build(first) == build(second)


def test_one_changed_byte_in_a_second_install_gives_another_id(tmp_path: Path) -> None:
    """Two installs of the same version from different sources differ."""
    first = make_install(tmp_path / "one")
    second = tmp_path / "two"
    shutil.copytree(first, second)
    (second / "app" / "quick.py").write_text("print('quicK')\n")  # same size
    assert build(first) != build(second)


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "app" / "quick.py").write_text("print('slow')\n"),
        lambda root: (root / "actors" / "listener" / "page" / "static" / "page.css").write_text("b{}\n"),
        lambda root: (root / "app" / "new.py").write_text(""),
        lambda root: (root / "examples" / "default.toml").unlink(),
        lambda root: (root / "app" / "quick.py").rename(root / "app" / "quick2.py"),
    ],
)
def test_a_changed_added_removed_or_renamed_file_changes_it(
    tmp_path: Path, home: Path, change: Callable[[Path], object]
) -> None:
    root = make_install(tmp_path / "i")
    before = build(root, home)
    change(root)
    after = build(root, home)
    assert after != before
    assert build(root) == after  # what the cache gave is what a computation gives


def test_bytecode_and_hidden_files_do_not_count(tmp_path: Path) -> None:
    root = make_install(tmp_path / "i")
    before = build(root)
    (root / "app" / "__pycache__").mkdir()
    (root / "app" / "__pycache__" / "quick.cpython-311.pyc").write_bytes(b"\0" * 64)
    (root / "app" / "stray.pyc").write_bytes(b"\0")
    (root / "app" / ".quick.py.swp").write_bytes(b"\0")
    assert build(root) == before


def test_linked_package_folders_count_as_the_folders(tmp_path: Path) -> None:
    """A checkout's src/assern links to its package folders."""
    real = make_install(tmp_path / "checkout")
    linked = tmp_path / "src" / "assern"
    linked.mkdir(parents=True)
    for folder in real.iterdir():
        (linked / folder.name).symlink_to(folder)
    assert build(linked) == build(real)


def test_the_cache_is_private_and_answers_while_every_file_is_unchanged(tmp_path: Path, home: Path) -> None:
    root = make_install(tmp_path / "i")
    computed = build(root, home)
    path = Path(cache_file(str(home), str(root)))
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent == home / "cache" / "build"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    kept = json.loads(path.read_text())
    assert "0.1.0+" + kept["digest"] == computed
    kept["digest"] = "0123456789ab"  # a cache hit gives what the cache holds
    path.write_text(json.dumps(kept))
    assert build(root, home) == "0.1.0+0123456789ab"


def test_a_cache_in_a_folder_others_may_write_is_neither_read_nor_written(tmp_path: Path, home: Path) -> None:
    root = make_install(tmp_path / "i")
    computed = build(root, home)
    path = Path(cache_file(str(home), str(root)))
    kept = json.loads(path.read_text())
    kept["digest"] = "0123456789ab"  # what another user could have put there
    path.write_text(json.dumps(kept))
    path.parent.chmod(0o777)
    assert build(root, home) == computed  # computed, not the planted digest
    assert json.loads(path.read_text())["digest"] == "0123456789ab"  # and not rewritten there


def test_a_file_touched_since_is_a_cache_miss(tmp_path: Path, home: Path) -> None:
    root = make_install(tmp_path / "i")
    computed = build(root, home)
    path = Path(cache_file(str(home), str(root)))
    kept = json.loads(path.read_text())
    kept["digest"] = "0123456789ab"
    path.write_text(json.dumps(kept))
    quick = root / "app" / "quick.py"
    info = quick.stat()
    os.utime(quick, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    assert build(root, home) == computed  # computed again, not the cache's
    assert json.loads(path.read_text())["digest"] == computed.split("+")[1]


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"format": 1}',
        b'{"format": 99, "root": "x", "digest": "0123456789ab", "files": []}',
        b'{"format": 1, "digest": "0123456789ab", "files": [["app/quick.py", "x"]]}',
    ],
)
def test_a_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path, home: Path, garbage: bytes) -> None:
    root = make_install(tmp_path / "i")
    expected = build(root)
    path = Path(cache_file(str(home), str(root)))
    path.parent.mkdir(parents=True)
    path.write_bytes(garbage)
    assert build(root, home) == expected
    kept = json.loads(path.read_text())
    assert (kept["format"], kept["root"], kept["digest"]) == (
        identity.CACHE_FORMAT,
        str(root),
        expected[-12:],
    )


def test_a_cache_that_cannot_be_written_leaves_the_id_computed(tmp_path: Path) -> None:
    root = make_install(tmp_path / "i")
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("a file where $ASSERN_HOME should be")
    assert build(root, not_a_folder) == build(root)


def test_each_install_has_a_cache_of_its_own(tmp_path: Path, home: Path) -> None:
    one, two = make_install(tmp_path / "one"), make_install(tmp_path / "two")
    (two / "app" / "quick.py").write_text("print('two')\n")
    assert build(one, home) != build(two, home)
    assert build(one, home) == build(one)
    assert build(two, home) == build(two)
    assert len(list((home / "cache" / "build").iterdir())) == 2


def test_a_cache_is_never_the_reason_a_folder_is_made(tmp_path: Path, home: Path) -> None:
    """`assernctl doctor` changes nothing; and a missing `$ASSERN_HOME` stays missing."""
    root = make_install(tmp_path / "i")
    missing = tmp_path / "missing"
    assert build(root, missing) == build(root)
    assert not missing.exists()
    assert build_id(str(home), root=str(root), version="0.1.0", keep=False) == build(root)
    assert list(home.iterdir()) == []
