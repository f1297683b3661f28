"""This install's build id: the version and a digest of the package's files.

A build id reads `0.1.0+3f9a1c2b4d5e`: the version, `+`, and 12 hex digits of a digest
of every file under the installed `assern` package folders (`supervisor/`, `actors/`,
`app/`, ...): each file's path relative to them and its bytes. Bytecode
(`__pycache__`, `.pyc`) and hidden files (a name starting with `.`) are left out: they
do not ship. Two installs of the same version from different sources differ, one
changed file changes it, and the same files in another folder give the same id.

Every client's `assern serve` computes it (app/daemon/hello.py), so it must be cheap:
the digest is kept in `$ASSERN_HOME/cache/build/` (0600 in a 0700 folder, written
atomically by app/private_file.py; a cache in a folder others may write, or not this
user's, is not read), one file per install folder, with the path, size, mtime_ns and
inode of every file it was computed from. When every file still has them, the kept digest is the build's (one
`stat` a file); anything else (a file added, removed or rewritten, a cache that is
corrupt or from another format) computes it again and rewrites the cache.

Standard library only, and not hashlib (app/quick.py builds the hello before anything
else is imported; see app/hint.py).
"""

from __future__ import annotations

import os

from assern.actors.identity import __version__
from assern.app.private_file import read_private_json, write_private_json

try:  # the builtin module hashlib wraps: importing hashlib would map OpenSSL (~4 MB)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Iterator

#: The folder that holds assern's package folders: `assern/` of the install (a wheel's
#: site-packages/assern, or a checkout's src/assern with its links to the folders).
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Where the digests are kept, under `$ASSERN_HOME`.
CACHE_FOLDER = os.path.join("cache", "build")
#: Bumped when the cache file's layout changes (an older one is then computed again).
CACHE_FORMAT = 1
#: Hex digits of the digest in a build id.
DIGITS = 12
_SKIPPED_SUFFIXES = (".pyc", ".pyo")

#: One file as the cache keys it: relative path, size, mtime_ns, inode.
Stat = tuple[str, int, int, int]


def _shipped(name: str) -> bool:
    return not name.startswith(".") and name != "__pycache__" and not name.endswith(_SKIPPED_SUFFIXES)


def _walk(folder: str, relative: str, top: bool) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(relative path, entry) of every shipped file under `folder`, in no set order.

    The top folder's links to folders are followed (a checkout's src/assern links to
    them); links deeper down are not. A folder that cannot be listed is skipped."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not _shipped(entry.name):
            continue
        path = f"{relative}/{entry.name}" if relative else entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=top)
        except OSError:
            continue
        if is_dir:
            yield from _walk(entry.path, path, False)
        else:
            yield path, entry


def package_files(root: str = PACKAGE_ROOT) -> list[tuple[Stat, str]]:
    """Every shipped file under `root`: its cache key and its full path, by relative path."""
    found = []
    for relative, entry in _walk(root, "", True):
        try:
            stat = entry.stat()
        except OSError:
            continue  # gone since it was listed
        found.append(((relative, stat.st_size, stat.st_mtime_ns, stat.st_ino), entry.path))
    found.sort()
    return found


def digest_of(files: list[tuple[Stat, str]]) -> str:
    """The digest of the files' relative paths and bytes (12 hex digits). A file that
    cannot be read counts by its path and the word `unreadable`."""
    digest = blake2b(digest_size=DIGITS // 2)
    for (relative, *_), path in files:
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            digest.update(b"unreadable\0")
            continue
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def cache_file(assern_home: str, root: str = PACKAGE_ROOT) -> str:
    """The cache file of the install at `root`."""
    name = blake2b(os.fsencode(root), digest_size=8).hexdigest()
    return os.path.join(assern_home, CACHE_FOLDER, f"{name}.json")


def _cached(path: str, root: str, stats: list[Stat]) -> str | None:
    """The kept digest when the cache at `path` was computed from exactly `stats`."""
    kept = read_private_json(path)
    if (
        not isinstance(kept, dict)
        or kept.get("format") != CACHE_FORMAT
        or kept.get("root") != root
        or not isinstance(kept.get("digest"), str)
        or len(kept["digest"]) != DIGITS
    ):
        return None
    files = kept.get("files")
    if not isinstance(files, list) or len(files) != len(stats):
        return None
    if any(not isinstance(f, list) or tuple(f) != s for f, s in zip(files, stats, strict=True)):
        return None
    digest: str = kept["digest"]
    return digest


def _keep(path: str, root: str, stats: list[Stat], digest: str) -> None:
    """Write the cache (app/private_file.py: 0600 in a private folder, atomically: a reader
    sees the old file or the new one). A cache that cannot be written is left out: the
    next start computes again."""
    write_private_json(path, {"format": CACHE_FORMAT, "root": root, "digest": digest, "files": stats})


def build_id(
    assern_home: str | None, root: str = PACKAGE_ROOT, version: str = __version__, *, keep: bool = True
) -> str:
    """This install's build id (see the module), from the cache in `assern_home` when it
    still holds (None: no cache, computed every time). A digest computed is kept in the
    cache when `keep` and `assern_home` exists (it is never created for a cache)."""
    files = package_files(root)
    stats = [stat for stat, _ in files]
    path = cache_file(assern_home, root) if assern_home else None
    digest = _cached(path, root, stats) if path else None
    if digest is None:
        digest = digest_of(files)
        if path and keep and assern_home and os.path.isdir(assern_home):
            _keep(path, root, stats, digest)
    return f"{version}+{digest}"
