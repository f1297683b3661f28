"""One structlog pipeline to a rotating JSON-lines file; never stdout (that is the MCP wire).

structlog events are rendered by structlog's native (fast) path; the stdlib loggers of
the SDK go through the same processors via `ProcessorFormatter`. Both write whole lines
to one `LineFile`, which appends each line with a single write and rotates by size.
Secrets are masked by `redact_secrets` before anything is rendered.

Lines are written from the trio thread itself: one small append to the page cache costs a
few microseconds, while a queue to a writer thread made every call pay for a GIL hand-off
(measured: about 1 ms a call, see ops/bench/call_latency.py).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, MutableMapping
    from pathlib import Path

LOG_FILE = "assern.log"

_SECRET_KEYS = re.compile(
    r"(?i)^(env|headers|authorization|token|secret|password|api[_-]?key|.*_token|.*_secret)$"
)


def redact(value: str) -> str:
    """Show a secret's first two characters only: `ab…(redacted)`."""
    return f"{value[:2]}…(redacted)" if len(value) > 4 else "…(redacted)"


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    """Whether values under `key` are masked (asked for every key of every event: cached)."""
    return _SECRET_KEYS.match(key) is not None


def redact_secrets(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Mask values under secret-looking keys; env and header maps keep their keys only."""
    for key, value in event.items():  # values are replaced, never keys: safe while iterating
        if not _secret_key(key):
            continue
        if isinstance(value, dict):
            event[key] = sorted(value)
        elif isinstance(value, str):
            event[key] = redact(value)
        else:
            event[key] = "(redacted)"
    return event


class IsoTimestamp:
    """`ts` as ISO 8601 UTC with microseconds (`2026-01-02T03:04:05.678901Z`).

    The date-and-time part is formatted once a second and reused: formatting it for
    every event cost about half of the per-call log line.
    """

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(
        self, _logger: object, _name: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second, self._prefix = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        micros = min(999_999, round((now - second) * 1_000_000))
        event["ts"] = f"{self._prefix}.{micros:06d}Z"
        return event


def shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        IsoTimestamp(),
        redact_secrets,
        structlog.processors.dict_tracebacks,
    ]


class LineFile:
    """An append-only log file of whole lines, rotated by size (`assern.log.1` … `.N`)."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._fd = self._open()

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        info = os.fstat(fd)
        self._size, self._inode, self._checked = info.st_size, info.st_ino, time.monotonic()
        return fd

    def _follow_rotation(self) -> None:
        """Reopen when another process (a proxy, the launcher) rotated the file under us."""
        now = time.monotonic()
        if now - self._checked < 1.0:
            return
        self._checked = now
        try:
            current = os.stat(self.path).st_ino
        except FileNotFoundError:
            current = None
        if current != self._inode:
            os.close(self._fd)
            self._fd = self._open()

    def write(self, line: str) -> None:
        data = line.encode("utf-8", "replace") + b"\n"
        self._follow_rotation()
        if self._size and self._size + len(data) > self.max_bytes:
            self._rotate()
        os.write(self._fd, data)
        self._size += len(data)

    def _rotate(self) -> None:
        os.close(self._fd)
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        if self.backups > 0:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._fd = self._open()

    def close(self) -> None:
        os.close(self._fd)


class _LineLogger:
    """The structlog logger: whatever the level, the rendered line goes to the file."""

    def __init__(self, file: LineFile) -> None:
        self._file = file

    def msg(self, message: str) -> None:
        self._file.write(message)

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


class _LineHandler(logging.Handler):
    def __init__(self, file: LineFile) -> None:
        super().__init__()
        self._file = file

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._file.write(self.format(record))
        except Exception:
            self.handleError(record)


@contextmanager
def configure_logging(
    log_dir: Path,
    *,
    level: str = "info",
    max_bytes: int = 10_000_000,
    backups: int = 5,
    quiet: Iterable[str] = (),
) -> Iterator[Path]:
    """Route every log event to `log_dir/assern.log` for the duration of the block.

    `quiet` names standard-library loggers whose info events are chatter (a line per
    HTTP request, say): they log warnings and above unless `level` is debug.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / LOG_FILE
    file = LineFile(path, max_bytes=max_bytes, backups=backups)
    handler = _LineHandler(file)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared_processors()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(default=str),
            ],
        )
    )
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    root.handlers = [handler]
    root.setLevel(level.upper())
    hushed = {name: logging.getLogger(name).level for name in quiet}
    if level.lower() != "debug":
        for name in hushed:
            logging.getLogger(name).setLevel(logging.WARNING)
    structlog.configure(
        processors=[*shared_processors(), structlog.processors.JSONRenderer(default=str)],
        logger_factory=lambda *_args: _LineLogger(file),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=False,  # a later configure (tests) must not write to a closed file
    )
    try:
        yield path
    finally:
        root.handlers, level_saved = saved
        root.setLevel(level_saved)
        for name, hushed_level in hushed.items():
            logging.getLogger(name).setLevel(hushed_level)
        structlog.reset_defaults()
        file.close()


def get_logger(**bound: Any) -> Any:
    return structlog.get_logger(**bound)
