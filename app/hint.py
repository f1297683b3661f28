"""Proxy hints: what a later `assern serve` needs to reach a running primary without
resolving the configuration again.

Resolving the configuration imports the config machinery, and electing imports trio and
structlog: a proxy that did both would stay a 30 MB process to copy bytes. So each
`assern serve` that took part in an election leaves a hint in `$ASSERN_HOME/run/hints/`,
keyed by everything its resolution started from (the command's arguments, the working
folder, the interpreter, `ASSERN_HOME`, `HOME`, assern's version). The hint names the
primary's sockets and the configuration's fingerprint, and it records what the
resolution depended on:

- every file that contributed or would contribute if it were created (the global and
  local config and .env files, their includes, each `.assern/` folder on the way up from
  the working folder to the project root), and, when a folder's own files were found,
  the trust store and the files still waiting for trust (a grant or a revoke changes
  the resolution), each with its (mtime, size, inode) or as absent;
- the values of the environment variables the resolution reads: `HOME`, `ASSERN_HOME`,
  the socket folder's variables, and every name referenced as `$NAME` or `${NAME}` in
  those files. Only a digest of the values is stored: the values may be secrets.

The hint also keeps the lines the resolution had for the user (a folder waiting for
trust), which the quick path prints as the full path would. A start whose key finds a
hint with every recorded file and value unchanged would resolve the same configuration,
so it may proxy to the hint's primary once that primary answers `hello` with the hint's
fingerprint (app/quick.py). Anything else falls back to the full resolution and
election, which writes a fresh hint.

Standard library only, without `pathlib` or `typing` at import: the quick path imports
this module before anything heavy.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys

from assern.actors.config.home import GLOBAL_CONFIG, LEGACY_GLOBAL_CONFIG, ORIGINAL_SERVERS_FILE
from assern.actors.identity import __version__
from assern.app.private_file import read_private_json, write_private_json

try:  # the builtin module hashlib wraps: importing hashlib would map OpenSSL (~4 MB)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - interpreters without the builtin module
    from hashlib import blake2b

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    from assern.actors.config.spec import ResolvedConfig

#: 2: the trust store and the notices are recorded (an older hint never watched them).
HINT_FORMAT = 2
HINTS_DIR = "hints"
#: Hints kept per `$ASSERN_HOME`; the oldest go first.
MAX_HINTS = 64
#: Variables read on every resolution, whatever the files say.
ALWAYS_READ = ("HOME", "ASSERN_HOME", "ASSERN_PYTHON", "XDG_RUNTIME_DIR", "TMPDIR")
_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


#: The `serve` options a hint may stand for; any other argument takes the full path.
SERVE_OPTIONS = ("--config", "--project", "--log-level", "--profile")
#: The variable that gives `assern serve` a profile when `--profile` does not.
PROFILE_VARIABLE = "ASSERN_PROFILE"


def serve_arguments(argv: Sequence[str]) -> list[str] | None:
    """`serve`'s options as `[name, value, ...]` in a canonical order, or None when
    `argv` is not a `serve` the quick path can stand for."""
    if not argv or argv[0] != "serve":
        return None
    found: dict[str, str] = {}
    rest = list(argv[1:])
    while rest:
        arg = rest.pop(0)
        name, equals, value = arg.partition("=")
        if name not in SERVE_OPTIONS or name in found:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        found[name] = value
    return [item for name in SERVE_OPTIONS if name in found for item in (name, found[name])]


def config_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment a configuration resolves against: the process's, plus
    `ASSERN_PYTHON` (configs may start Python servers with assern's own interpreter)."""
    found = dict(environ)
    found.setdefault("ASSERN_PYTHON", sys.executable)
    return found


def _digest(text: str, size: int = 16) -> str:
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size).hexdigest()


def hint_key(args: Sequence[str], cwd: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """What a resolution starts from, besides files and referenced variables."""
    return {
        "format": HINT_FORMAT,
        "version": __version__,
        "args": list(args),
        "cwd": cwd,
        "python": sys.executable,
        "assern_home": environ.get("ASSERN_HOME"),
        "home": environ.get("HOME"),
    }


def key_digest(key: Mapping[str, Any]) -> str:
    """A start's key (`hint_key`) as a short name for the files kept for it."""
    return _digest(json.dumps(key, sort_keys=True))


def hint_file(assern_home: str | Path, key: Mapping[str, Any]) -> str:
    """Where the hint for `key` lives: `$ASSERN_HOME/run/hints/<digest of key>.json`."""
    return os.path.join(assern_home, "run", HINTS_DIR, f"{key_digest(key)}.json")


def signature(path: str) -> list[int] | None:
    """(mtime in ns, size, inode) of a file, or None when there is no file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return [info.st_mtime_ns, info.st_size, info.st_ino]


def referenced_names(texts: Iterable[str]) -> set[str]:
    """Every name written as `$NAME` or `${NAME...}` (more than are expanded: harmless)."""
    return {match.group(1) for text in texts for match in _REFERENCE.finditer(text)}


def env_digest(names: Iterable[str], environ: Mapping[str, str]) -> str:
    """A digest of the named variables' values (None for unset ones)."""
    return _digest(json.dumps([[name, environ.get(name)] for name in sorted(names)]))


def watched_paths(config: ResolvedConfig, *, cwd: str, assern_home: Path, args: Sequence[str]) -> list[str]:
    """Every file whose creation, change or removal could change the resolution: the
    resolution's own files and potential files, plus what they leave out (the original
    layout's files, a project root appearing between the working folder and the root)."""
    from pathlib import Path

    from assern.actors.config.project import local_files, local_root_search

    paths = [*map(str, config.files), *map(str, config.potential_files), *map(str, config.trust.watched)]
    paths += [str(assern_home / name) for name in (".env", GLOBAL_CONFIG, LEGACY_GLOBAL_CONFIG)]
    global_file = _option(args, "--config")
    global_dir = Path(cwd, global_file).parent if global_file else assern_home
    paths.append(str(global_dir / ORIGINAL_SERVERS_FILE))
    paths += [str(path) for folder in local_root_search(Path(cwd)) for path in local_files(folder)]
    return list(dict.fromkeys(paths))


def _option(args: Sequence[str], name: str) -> str | None:
    for index, arg in enumerate(args[:-1]):
        if arg == name:
            return args[index + 1]
    return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""


def resolution_stamp(
    config: ResolvedConfig, *, cwd: str, args: Sequence[str], environ: Mapping[str, str], assern_home: Path
) -> dict[str, Any]:
    """What a resolution of `config` depended on: every watched file's signature and a
    digest of the variables those files refer to (`stamp_holds` checks them again)."""
    paths = watched_paths(config, cwd=cwd, assern_home=assern_home, args=args)
    signatures = {path: signature(path) for path in paths}
    names = set(ALWAYS_READ) | referenced_names(_read(path) for path, sig in signatures.items() if sig)
    return {"files": signatures, "env_names": sorted(names), "env_digest": env_digest(names, environ)}


def stamp_holds(stamp: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """Whether every file and variable a `resolution_stamp` recorded is as it was.

    Raises:
        KeyError, TypeError, AttributeError: `stamp` is not one (a file of another shape).
    """
    files: dict[str, list[int] | None] = stamp["files"]
    if any(signature(file) != recorded for file, recorded in files.items()):
        return False
    return bool(env_digest(stamp["env_names"], environ) == stamp["env_digest"])


def make_hint(
    config: ResolvedConfig,
    *,
    key: Mapping[str, Any],
    environ: Mapping[str, str],
    assern_home: Path,
    fingerprint: str,
    slot: str,
    mcp: Path,
    control: Path,
    lock: Path,
) -> dict[str, Any]:
    """The hint for a start that resolved `config` from `key` and `environ`."""
    stamp = resolution_stamp(
        config, cwd=str(key["cwd"]), args=key["args"], environ=environ, assern_home=assern_home
    )
    return {
        "key": dict(key),
        "fingerprint": fingerprint,
        "slot": slot,
        "mcp": str(mcp),
        "control": str(control),
        "lock": str(lock),
        **stamp,
        "notices": config.trust.lines(),
    }


def write_hint(path: str, hint: Mapping[str, Any]) -> None:
    """Write `hint` atomically (0600, in a 0700 folder) and drop the oldest beyond MAX_HINTS.

    A hint is an optimisation: a folder or file that cannot be written is left alone.
    """
    if write_private_json(path, hint):
        _prune(os.path.dirname(path))


def _prune(folder: str) -> None:
    try:
        hints = [entry for entry in os.scandir(folder) if entry.name.endswith(".json")]
        if len(hints) <= MAX_HINTS:
            return
        hints.sort(key=lambda entry: entry.stat().st_mtime_ns)
        for entry in hints[: len(hints) - MAX_HINTS]:
            os.unlink(entry.path)
    except OSError:
        return


def valid_hint(path: str, key: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The hint at `path` if it is ours, for `key`, and nothing it recorded changed."""
    hint = read_private_json(path)
    if not isinstance(hint, dict):
        return None
    try:
        if hint["key"] != dict(key) or not stamp_holds(hint, environ):
            return None
        for field in ("fingerprint", "slot", "mcp", "control", "lock"):
            if not isinstance(hint[field], str):
                return None
        notices = hint.get("notices", [])
        if not isinstance(notices, list) or not all(isinstance(line, str) for line in notices):
            return None
    except (KeyError, TypeError, AttributeError):
        return None
    return dict(hint)
