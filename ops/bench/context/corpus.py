"""The context benchmark's corpus: pinned source distributions, fetched and checked.

    .venv/bin/python ops/bench/context/corpus.py              # fetch and unpack all
    .venv/bin/python ops/bench/context/corpus.py --manifest   # also rewrite manifest/*.txt
    .venv/bin/python ops/bench/context/corpus.py click        # one project

Each project of corpus.toml is downloaded with pip (`pip download --no-deps
--no-binary :all: NAME==VERSION`) into the cache (ops/bench/context/.cache/, git-ignored,
or $ASSERN_CONTEXT_BENCH_CACHE), its archive checked against the recorded sha256 (a
mismatch stops everything: the labels were written for those exact files), and unpacked
to CACHE/src/ROOT. An archive already in the cache with the right digest is not fetched
again. `--manifest` writes manifest/NAME.txt: the project's files, one relative POSIX
path a line, which the query-set test reads instead of the sources.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE / "manifest"


@attrs.frozen
class Project:
    name: str
    version: str
    archive: str
    sha256: str
    root: str
    #: held out: not among the projects the engine's ranking was tuned on (run.py
    #: reports these apart; their questions are in heldout.toml)
    heldout: bool = False


def projects(path: Path = HERE / "corpus.toml") -> list[Project]:
    return [Project(**raw) for raw in tomllib.loads(path.read_text())["project"]]


def cache_dir() -> Path:
    return Path(os.environ.get("ASSERN_CONTEXT_BENCH_CACHE") or HERE / ".cache")


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


class CorpusError(Exception):
    pass


def fetch_archive(project: Project, cache: Path) -> Path:
    """The project's archive in the cache, downloaded by pip if absent, its digest checked."""
    archives = cache / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    archive = archives / project.archive
    if not archive.exists():
        with tempfile.TemporaryDirectory(dir=archives) as scratch:
            done = subprocess.run(
                [
                    sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--no-binary", ":all:", "--dest", scratch,
                    f"{project.name}=={project.version}",
                ],
                capture_output=True,
                text=True,
            )  # fmt: skip
            got = Path(scratch) / project.archive
            if done.returncode != 0 or not got.exists():
                raise CorpusError(
                    f"pip could not download {project.name}=={project.version} ({project.archive}): "
                    f"{done.stderr.strip()[-2000:]}"
                )
            got.replace(archive)
    found = digest(archive)
    if found != project.sha256:
        raise CorpusError(
            f"{archive}: sha256 {found}, corpus.toml records {project.sha256} for "
            f"{project.name}=={project.version}; delete the file to fetch it again"
        )
    return archive


def unpack(project: Project, archive: Path, cache: Path) -> Path:
    """The project's root under CACHE/src, unpacked once (a marker says it is complete)."""
    src = cache / "src"
    root = src / project.root
    marker = src / f".{project.root}.{project.sha256[:16]}.done"
    if marker.exists() and root.is_dir():
        return root
    shutil.rmtree(root, ignore_errors=True)
    src.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.name.startswith(project.root + "/") and member.name != project.root:
                raise CorpusError(f"{archive}: {member.name} lies outside {project.root}/")
        tar.extractall(src, filter="data")
    marker.touch()
    return root


def ensure(project: Project, cache: Path | None = None) -> Path:
    """Fetch, check and unpack one project; its root folder. Runs sharing the cache (the
    test suite's workers) take turns, so none reads a root another is unpacking."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return unpack(project, fetch_archive(project, cache), cache)


def files_of(root: Path) -> list[str]:
    """Every regular file under root, as sorted relative POSIX paths."""
    return sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.is_symlink()
    )


def manifest(name: str) -> list[str]:
    return (MANIFESTS / f"{name}.txt").read_text().splitlines()


def write_manifest(project: Project, root: Path) -> Path:
    MANIFESTS.mkdir(exist_ok=True)
    path = MANIFESTS / f"{project.name}.txt"
    path.write_text("".join(f"{line}\n" for line in files_of(root)))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="projects to fetch (default: all of corpus.toml)")
    parser.add_argument("--manifest", action="store_true", help="rewrite manifest/NAME.txt")
    args = parser.parse_args()
    chosen = [p for p in projects() if not args.names or p.name in args.names]
    unknown = set(args.names) - {p.name for p in chosen}
    if unknown:
        parser.error(f"not in corpus.toml: {', '.join(sorted(unknown))}")
    try:
        for project in chosen:
            root = ensure(project)
            line = f"{project.name:<10} {project.version:<8} {len(files_of(root)):>5} files  {root}"
            if args.manifest:
                line += f"  -> {write_manifest(project, root).relative_to(HERE)}"
            print(line)
    except CorpusError as error:
        print(f"corpus: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
