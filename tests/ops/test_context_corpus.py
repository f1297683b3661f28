"""The context benchmark's corpus script (ops/bench/context/corpus.py) without the
network: an archive in the cache is checked against its recorded digest before use, and
unpacked only when every member lies under the project's root."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ops_scripts import OPS, load_script

BENCH = OPS / "bench" / "context"


corpus = load_script(BENCH / "corpus.py", "context_bench_corpus")


def archive(path: Path, members: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def project(sha256: str) -> Any:
    return corpus.Project(
        name="demo", version="1.0", archive="demo-1.0.tar.gz", sha256=sha256, root="demo-1.0"
    )


def test_a_checked_archive_is_unpacked_once_and_listed(tmp_path: Path) -> None:
    digest = archive(
        tmp_path / "archives" / "demo-1.0.tar.gz", {"demo-1.0/src/a.py": b"A = 1\n", "demo-1.0/README": b"hi"}
    )
    root = corpus.ensure(project(digest), tmp_path)
    assert root == tmp_path / "src" / "demo-1.0"
    assert corpus.files_of(root) == ["README", "src/a.py"]
    (root / "src" / "a.py").write_text("changed")
    assert corpus.ensure(project(digest), tmp_path) == root  # not unpacked again
    assert (root / "src" / "a.py").read_text() == "changed"


def test_an_archive_whose_digest_differs_is_refused(tmp_path: Path) -> None:
    archive(tmp_path / "archives" / "demo-1.0.tar.gz", {"demo-1.0/a.py": b"A = 1\n"})
    with pytest.raises(
        corpus.CorpusError, match=r"demo-1\.0\.tar\.gz: sha256 [0-9a-f]{64}, corpus.toml records 0{64}"
    ):
        corpus.ensure(project("0" * 64), tmp_path)
    assert not (tmp_path / "src" / "demo-1.0").exists()


def test_an_archive_with_a_member_outside_its_root_is_refused(tmp_path: Path) -> None:
    digest = archive(tmp_path / "archives" / "demo-1.0.tar.gz", {"demo-1.0/a.py": b"", "elsewhere/b.py": b""})
    with pytest.raises(corpus.CorpusError, match=r"elsewhere/b\.py lies outside demo-1\.0/"):
        corpus.ensure(project(digest), tmp_path)
    assert not (tmp_path / "src" / "elsewhere").exists()
