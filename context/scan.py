"""Which files of a root are indexed: ignore files, fixed exclusions, secrets and limits.

A file is indexed when none of these says no:

- the ignore files of its folder and of every folder above it up to the root
  (`.gitignore`, `.ignore`, `.assernignore`, read with git's own wildmatch semantics by
  pathspec; a deeper file's rule wins, `!pattern` re-includes), then the server's
  `exclude` globs (same syntax, anchored at the root);
- `NEVER_DIRS`: version control, virtualenvs (any folder holding `pyvenv.cfg`),
  `node_modules/`, caches and build output are never entered;
- `SECRETS`: secret files are never indexed nor returned (`is_secret`);
- its size: files over `max_file_size` bytes are left out, and so are files whose
  extension says they are binary (`BINARY_SUFFIXES`); the indexer also refuses any
  file whose first bytes hold a NUL (`looks_binary`).

Symbolic links are never followed while walking: a link's target is indexed under its
own path when it lies inside the root, and never when it lies outside. So a link loop
cannot trap the walk.
"""

from __future__ import annotations

import os
import re
import stat
from typing import TYPE_CHECKING

import attrs
import pathspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

#: The ignore files read in every folder, in this order (a later file's rule wins).
IGNORE_FILES = (".gitignore", ".ignore", ".assernignore")

#: Folders never entered, wherever they are: version control, dependencies, virtualenvs,
#: caches and build output (a folder holding `pyvenv.cfg` is a virtualenv too).
NEVER_DIRS = frozenset(
    """
    .git .hg .svn .bzr _darcs .jj
    node_modules bower_components jspm_packages .yarn .pnpm-store
    .venv venv .virtualenv __pypackages__ site-packages .tox .nox .eggs
    __pycache__ .mypy_cache .pytest_cache .ruff_cache .hypothesis .cache .parcel-cache
    build dist target out-tsc .next .nuxt .svelte-kit .gradle .terraform
    .idea .vscode .assern coverage htmlcov
    """.split()  # noqa: SIM905 - a word list reads better as text
)

#: Secret files, in gitignore syntax (a pattern without `/` matches the name in any
#: folder): never indexed, never returned by `get_file`. A server's `secrets = [...]`
#: adds patterns to these, never removes any.
SECRETS = (
    # environment files and their variants (.env.local, .env.production, ...)
    ".env",
    ".env.*",
    ".envrc",
    # private keys, certificates and key stores
    "*.pem",
    "*.key",
    "*.crt",
    "*.cer",
    "*.der",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.asc",
    "*.gpg",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.ppk",
    # credential files of common tools
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    ".dockercfg",
    ".docker/config.json",
    ".aws/credentials",
    ".kube/config",
    "credentials",
    "credentials.json",
    "*credentials*.json",
    "service-account*.json",
    "client_secret*.json",
    "secrets.yml",
    "secrets.yaml",
    "secrets.json",
    "secrets.toml",
    "*.tfvars",
    "*.tfstate",
    "*.tfstate.*",
    "terraform.tfstate*",
    # a version-control folder may hold credentials in its config, and assern's own
    # project folder holds the project's env values
    ".git/",
    ".assern/",
)

#: Extensions of files that are never text (checked before any byte is read).
BINARY_SUFFIXES = frozenset(
    """
    .png .jpg .jpeg .gif .bmp .ico .icns .webp .tif .tiff .psd .svgz
    .zip .gz .tgz .bz2 .xz .zst .7z .rar .tar .jar .war .whl .egg .deb .rpm .dmg .iso
    .so .dylib .dll .exe .o .a .lib .obj .pyc .pyo .class .wasm .bin .dat .db .sqlite
    .sqlite3 .pdf .doc .docx .xls .xlsx .ppt .pptx .odt .mp3 .mp4 .wav .ogg .flac .avi
    .mov .mkv .webm .woff .woff2 .ttf .otf .eot .pkl .pickle .npy .npz .parquet .onnx
    .pt .safetensors .h5
    """.split()  # noqa: SIM905
)

#: How many leading bytes `looks_binary` reads.
SNIFF_BYTES = 8192
#: The default `max_file_size`: 1 MB.
DEFAULT_MAX_FILE_SIZE = 1_000_000


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file say it is binary (a NUL byte, as git decides)."""
    return b"\0" in head[:SNIFF_BYTES]


@attrs.frozen(kw_only=True)
class ScanRules:
    """What a root's walk leaves out besides its ignore files.

    Attributes:
        exclude: gitignore-style globs anchored at the root (the server's `exclude`).
        max_file_size: Larger files are not indexed (bytes).
        secrets: Patterns added to `SECRETS`.
    """

    exclude: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    secrets: tuple[str, ...] = ()


class SecretFilter:
    """Tells secret files by their path relative to the root (`SECRETS` + extra)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self._spec = pathspec.GitIgnoreSpec.from_lines([*SECRETS, *extra])
        # Any including pattern, as one expression: a path none of them matches is no
        # secret, which spares the walk a match per pattern for almost every file (the
        # patterns' own expressions, their named group made plain so they can be joined).
        self._any = re.compile(
            "|".join(
                f"(?:{pattern.regex.pattern.replace('(?P<ps_d>', '(?:')})"
                for pattern in self._spec.patterns
                if pattern.include and pattern.regex is not None
            )
            or "(?!)"
        )

    def __call__(self, relative: str) -> bool:
        """Whether `relative` (a POSIX path below the root) is, or lies inside, a secret."""
        if self.matches(relative):
            return True
        parts = relative.split("/")
        # a file inside a secret folder (`.git/config`, `.aws/credentials/x`)
        return any(self.matches("/".join(parts[:i]) + "/") for i in range(1, len(parts)))

    def matches(self, relative: str) -> bool:
        """Whether `relative` itself is a secret (its folders aside: the walk judged them
        when it entered them). A folder's path ends with `/`."""
        return self._any.search(relative) is not None and self._spec.match_file(relative)


@attrs.frozen(kw_only=True)
class FoundFile:
    """One file the walk keeps: its POSIX path below the root, size and mtime."""

    path: str
    size: int
    mtime_ns: int


@attrs.frozen(kw_only=True)
class Skipped:
    """One path the walk left out for a reason worth telling (unreadable, too large)."""

    path: str
    reason: str


@attrs.mutable
class ScanResult:
    """The files a walk keeps, in walk order, what it skipped for a reason, and the
    folders it entered (relative, "" for the root: what a watcher watches)."""

    files: list[FoundFile] = attrs.Factory(list)
    skipped: list[Skipped] = attrs.Factory(list)
    folders: list[str] = attrs.Factory(list)


@attrs.frozen
class _Rules:
    """One folder's ignore rules: the folder (relative, "" for the root) and its spec."""

    base: str
    spec: pathspec.GitIgnoreSpec


def _verdict(stack: Sequence[_Rules], relative: str, is_dir: bool) -> bool:
    """Whether the rules in `stack` (root first) ignore `relative`: the deepest that has
    an opinion decides."""
    ignored = False
    for rules in stack:
        below = relative[len(rules.base) + 1 :] if rules.base else relative
        result = rules.spec.check_file(below + "/" if is_dir else below)
        if result.include is not None:
            ignored = result.include
    return ignored


def _read_ignore_files(folder: str, base: str) -> _Rules | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as file:
                lines += file.read().splitlines()
        except OSError:
            continue
    return _Rules(base, pathspec.GitIgnoreSpec.from_lines(lines)) if lines else None


def _enters(path: str, relative: str, checks: Sequence[_Rules], secret: SecretFilter) -> bool:
    """Whether the walk enters the folder at `relative`."""
    name = relative.rsplit("/", 1)[-1]
    if name in NEVER_DIRS or name.endswith(".egg-info"):
        return False
    if os.path.exists(os.path.join(path, "pyvenv.cfg")):
        return False
    return not (_verdict(checks, relative, True) or secret.matches(relative + "/"))


def _keeps(relative: str, checks: Sequence[_Rules], secret: SecretFilter) -> bool:
    """Whether the walk keeps the regular file at `relative` (its size aside)."""
    if _verdict(checks, relative, False) or secret.matches(relative):
        return False
    return os.path.splitext(relative)[1].lower() not in BINARY_SUFFIXES


def check_file(root: Path, rules: ScanRules, relative: str, *, secret: SecretFilter) -> FoundFile | None:
    """What `scan` would say of the one file at `relative`: kept (with its stat) or not.

    The ignore files of every folder above it are read again, so a watcher can judge a
    changed file without walking the whole root.
    """
    top = os.fspath(root)
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    exclude = _Rules("", pathspec.GitIgnoreSpec.from_lines(rules.exclude)) if rules.exclude else None
    stack: tuple[_Rules, ...] = ()
    base = ""
    for index in range(len(parts)):
        folder = os.path.join(top, base) if base else top
        if base and not _enters(folder, base, (*stack, exclude) if exclude else stack, secret):
            return None
        own = _read_ignore_files(folder, base)
        stack = (*stack, own) if own else stack
        if index < len(parts) - 1:
            base = f"{base}/{parts[index]}" if base else parts[index]
    checks = (*stack, exclude) if exclude else stack
    try:
        info = os.lstat(os.path.join(top, relative))
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or not _keeps(relative, checks, secret):
        return None
    if info.st_size > rules.max_file_size:
        return None
    return FoundFile(path=relative, size=info.st_size, mtime_ns=info.st_mtime_ns)


def scan(
    root: Path, rules: ScanRules, *, secret: SecretFilter | None = None, files: bool = True
) -> ScanResult:
    """Walk `root` and keep every file that is to be indexed.

    Args:
        root: An existing folder.
        rules: The server's exclusions and size limit.
        secret: The secret filter (built from `rules.secrets` when not given).
        files: False to find the folders only (what a watcher watches), a tenth of the time.

    Returns:
        The kept files in walk order (folders sorted by name), and the paths skipped for
        a reason worth logging (an unreadable folder, a file over the size limit).
    """
    secret = secret or SecretFilter(rules.secrets)
    exclude = _Rules("", pathspec.GitIgnoreSpec.from_lines(rules.exclude)) if rules.exclude else None
    result = ScanResult()
    top = os.fspath(root)
    root_rules = _read_ignore_files(top, "")
    pending: list[tuple[str, tuple[_Rules, ...]]] = [("", (root_rules,) if root_rules else ())]
    while pending:
        relative_dir, stack = pending.pop()
        folder = os.path.join(top, relative_dir) if relative_dir else top
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            result.skipped.append(Skipped(path=relative_dir or ".", reason=f"unreadable: {exc.strerror}"))
            continue
        result.folders.append(relative_dir)
        checks = (*stack, exclude) if exclude else stack
        subfolders: list[tuple[str, tuple[_Rules, ...]]] = []
        for entry in entries:
            if not files and not entry.is_dir(follow_symlinks=False):
                continue
            relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished while we looked
            if stat.S_ISLNK(info.st_mode):
                continue  # never followed (module docstring)
            if stat.S_ISDIR(info.st_mode):
                if not _enters(entry.path, relative, checks, secret):
                    continue
                own = _read_ignore_files(entry.path, relative)
                subfolders.append((relative, (*stack, own) if own else stack))
                continue
            if not stat.S_ISREG(info.st_mode):
                continue  # sockets, fifos, devices
            if not _keeps(relative, checks, secret):
                continue
            if info.st_size > rules.max_file_size:
                result.skipped.append(
                    Skipped(path=relative, reason=f"{info.st_size} bytes, over {rules.max_file_size}")
                )
                continue
            result.files.append(FoundFile(path=relative, size=info.st_size, mtime_ns=info.st_mtime_ns))
        pending.extend(reversed(subfolders))
    return result
