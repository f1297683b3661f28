"""The walk keeps what the ignore files, the fixed exclusions and the limits allow."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pathspec
import pytest

from assern.context.index import BATCH_FILES, batches, plan
from assern.context.scan import SECRETS, ScanRules, SecretFilter, check_file, looks_binary, scan
from assern.context.store import Known


def _tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def _kept(root: Path, rules: ScanRules | None = None) -> list[str]:
    return sorted(found.path for found in scan(root, rules or ScanRules()).files)


def test_gitignore_rules_apply_with_git_semantics(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".gitignore": "*.log\nlogs/\n!keep.log\n/only_root.txt\n",
            "a.py": "x",
            "debug.log": "x",
            "keep.log": "x",
            "logs/today.txt": "x",
            "only_root.txt": "x",
            "sub/only_root.txt": "x",
            "sub/deep/trace.log": "x",
        },
    )
    assert _kept(tmp_path) == [".gitignore", "a.py", "keep.log", "sub/only_root.txt"]


def test_a_deeper_ignore_file_wins_and_applies_below_its_folder(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".gitignore": "*.gen.py\n",
            "pkg/.gitignore": "!wanted.gen.py\nlocal_only.py\n",
            "pkg/wanted.gen.py": "x",
            "pkg/other.gen.py": "x",
            "pkg/local_only.py": "x",
            "local_only.py": "x",
        },
    )
    assert _kept(tmp_path) == [".gitignore", "local_only.py", "pkg/.gitignore", "pkg/wanted.gen.py"]


def test_ignore_and_assernignore_and_exclude_add_rules(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".ignore": "fixtures/\n",
            ".assernignore": "*.snap\n",
            "fixtures/a.py": "x",
            "t.snap": "x",
            "app.min.js": "x",
            "app.js": "x",
        },
    )
    kept = _kept(tmp_path, ScanRules(exclude=("*.min.js",)))
    assert kept == [".assernignore", ".ignore", "app.js"]


def test_fixed_folders_and_virtualenvs_are_never_entered(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".git/config": "x",
            "node_modules/lib/index.js": "x",
            "build/out.py": "x",
            "__pycache__/m.py": "x",
            "myenv/pyvenv.cfg": "home = /usr",
            "myenv/lib/site.py": "x",
            "pkg.egg-info/PKG-INFO": "x",
            "src/main.py": "x",
        },
    )
    assert _kept(tmp_path) == ["src/main.py"]


def test_secrets_are_never_kept(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".env": "TOKEN=1",
            ".env.production": "TOKEN=1",
            "deploy/server.pem": "x",
            "keys/id_rsa": "x",
            "keys/id_ed25519.pub": "x",
            "home/.netrc": "x",
            "gcp/service-account-prod.json": "{}",
            "config/app.toml": "x",
        },
    )
    assert _kept(tmp_path) == ["config/app.toml"]
    assert _kept(tmp_path, ScanRules(secrets=("config/*.toml",))) == []


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (".env", True),
        ("sub/.env.local", True),
        (".git/config", True),
        (".assern/config.toml", True),
        ("a/b/c.key", True),
        ("ssl/cert.crt", True),
        ("src/environment.py", False),
        ("docs/keys.md", False),
        ("src/key.py", False),
    ],
)
def test_the_secret_filter(path: str, secret: bool) -> None:
    assert SecretFilter()(path) is secret


def test_the_secret_filter_answers_as_every_pattern_one_by_one() -> None:
    # the filter's one-expression shortcut must agree with the patterns matched one by one
    extra = ("config/*.toml", "!config/public.toml", "local-*")
    spec = pathspec.GitIgnoreSpec.from_lines([*SECRETS, *extra])
    secret = SecretFilter(extra)
    names = [*SECRETS, "src/app.py", "docs/keys.md", "config/app.toml", "config/public.toml", "local-x"]
    paths = {name.strip("/").replace("*", "x") for name in names}
    paths |= {f"deep/er/{path}" for path in paths} | {f"{path}/" for path in paths}
    for path in sorted(paths):
        assert secret.matches(path) is spec.match_file(path), path
    assert sum(secret.matches(path) for path in paths) > len(paths) // 2


def test_large_and_binary_named_files_are_left_out(tmp_path: Path) -> None:
    _tree(tmp_path, {"big.txt": "x" * 2000, "small.txt": "x", "image.png": b"\x89PNG", "lib.so": b"\0"})
    result = scan(tmp_path, ScanRules(max_file_size=1000))
    assert [found.path for found in result.files] == ["small.txt"]
    assert [(s.path, s.reason) for s in result.skipped] == [("big.txt", "2000 bytes, over 1000")]


def test_nul_bytes_mean_binary() -> None:
    assert looks_binary(b"abc\0def")
    assert not looks_binary("naïve text".encode())


def test_symlinks_are_not_followed_and_loops_are_safe(tmp_path: Path) -> None:
    outside = _tree(tmp_path / "outside", {"secret_plan.py": "x"})
    root = _tree(tmp_path / "root", {"a.py": "x", "pkg/b.py": "x"})
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret_plan.py", root / "plan.py")
    os.symlink(root, root / "pkg" / "loop")
    os.symlink(root / "a.py", root / "alias.py")
    assert _kept(root) == ["a.py", "pkg/b.py"]


def test_an_unreadable_folder_is_skipped_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(tmp_path, {"a.py": "x", "locked/b.py": "x"})
    real = os.scandir

    def scandir(path: str) -> Any:  # the tests run as root, who reads every folder
        if path.endswith("locked"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = scan(tmp_path, ScanRules())
    assert [f.path for f in result.files] == ["a.py"]
    assert [(s.path, s.reason) for s in result.skipped] == [("locked", "unreadable: Permission denied")]


def test_files_keep_size_and_mtime(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "hello"})
    os.utime(tmp_path / "a.py", ns=(1_000_000_000, 2_000_000_000))
    (found,) = scan(tmp_path, ScanRules()).files
    assert (found.size, found.mtime_ns) == (5, 2_000_000_000)


def test_one_file_is_judged_as_the_whole_walk_judges_it(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        ".gitignore": "*.log\nlogs/\n!keep.log\n",
        "a.py": "x",
        "debug.log": "x",
        "keep.log": "x",
        "logs/today.txt": "x",
        "pkg/.gitignore": "!wanted.log\nlocal_only.py\n",
        "pkg/wanted.log": "x",
        "pkg/local_only.py": "x",
        "pkg/deep/ok.py": "x",
        "node_modules/x.js": "x",
        "app.min.js": "x",
        ".env": "x",
        "big.txt": "x" * 2000,
        "img.png": b"x",
        "venv1/pyvenv.cfg": "x",
        "venv1/lib.py": "x",
    }
    _tree(tmp_path, files)
    rules = ScanRules(exclude=("*.min.js",), max_file_size=1000)
    secret = SecretFilter()
    kept = {found.path for found in scan(tmp_path, rules).files}
    judged = {path for path in files if check_file(tmp_path, rules, path, secret=secret) is not None}
    assert judged == kept
    assert "pkg/deep/ok.py" in kept
    assert check_file(tmp_path, rules, "../outside.py", secret=secret) is None
    assert check_file(tmp_path, rules, "missing.py", secret=secret) is None


def test_the_walk_lists_the_folders_it_entered(tmp_path: Path) -> None:
    _tree(
        tmp_path, {"a/b/c.py": "x", "node_modules/d.js": "x", ".gitignore": "ignored/\n", "ignored/e.py": "x"}
    )
    assert scan(tmp_path, ScanRules()).folders == ["", "a", "a/b"]


def test_a_walk_of_the_folders_only_finds_the_folders_a_full_walk_enters(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".gitignore": "ignored/\n",
            "src/pkg/a.py": "x",
            "src/b.py": "x",
            "ignored/c.py": "x",
            "node_modules/d/e.js": "x",
            ".git/config": "x",
            "docs/f.md": "x",
        },
    )
    full = scan(tmp_path, ScanRules())
    folders = scan(tmp_path, ScanRules(), files=False)
    assert folders.files == []
    assert folders.folders == full.folders == ["", "docs", "src", "src/pkg"]


def test_a_hundred_thousand_files_are_walked_and_planned_in_bounded_batches(tmp_path: Path) -> None:
    """Issue 42's 100,000 files: every one found, planned and cut into batches of at most
    `BATCH_FILES` (one transaction each, so the indexer's memory does not grow with the
    tree: ops/bench/context/run.py --files 100000 measures the whole index); with
    everything known, nothing is planned."""
    root = tmp_path / "big"
    for folder in range(500):
        where = root / f"pkg_{folder:03}"
        where.mkdir(parents=True)
        for index in range(200):
            os.close(os.open(where / f"mod_{index}.py", os.O_CREAT | os.O_WRONLY, 0o644))
    found = scan(root, ScanRules())
    assert len(found.files) == 100_000
    assert len(found.folders) == 501
    todo = plan(found.files, {})
    assert len(todo.changed) == 100_000
    cut = batches(todo.changed)
    assert len(cut) == 100_000 // BATCH_FILES
    assert max(len(batch) for batch in cut) == BATCH_FILES
    known = {file.path: Known(size=file.size, mtime_ns=file.mtime_ns, hash="") for file in found.files}
    again = plan(found.files, known)
    assert again.changed == ()
    assert again.deleted == ()
