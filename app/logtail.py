"""Reading assern's JSON-lines log for `assernctl logs`: filters, formatting, following.

The log is `$ASSERN_HOME/logs/assern.log`, rotated by size to `assern.log.1` (newest)
… `assern.log.N` (oldest) by the process that writes it (supervisor/io/logs.py). A
`Follower` reads what is appended and, when the file is rotated away, finishes the old
file before it continues with the new one, so no line is lost or read twice.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

#: Severity order of the `level` key (structlog's names).
LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50, "exception": 40}
#: Keys every line has, shown in fixed places rather than as key=value.
_FIXED = ("ts", "level", "event", "server", "actor")


def parse(line: str) -> dict[str, Any] | None:
    """The event of one log line, or None when the line is not a JSON object."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


@attrs.frozen(kw_only=True)
class LogFilter:
    """Which lines to show.

    Attributes:
        server: Only events tagged with this server.
        level: Only events at this level or above (debug, info, warning, error, critical).
        grep: Only lines containing this text (case-insensitive, anywhere in the JSON).
    """

    server: str | None = None
    level: str | None = None
    grep: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.level is not None and self.level.lower() not in LEVELS:
            known = "debug, info, warning, error, critical"
            raise ValueError(f"unknown level {self.level!r}; use one of {known}")

    def accepts(self, line: str) -> bool:
        if self.grep is not None and self.grep.lower() not in line.lower():
            return False
        if self.server is None and self.level is None:
            return True
        event = parse(line)
        if event is None:
            return False
        if self.server is not None and event.get("server") != self.server:
            return False
        if self.level is not None:
            seen = LEVELS.get(str(event.get("level", "")).lower(), 0)
            if seen < LEVELS[self.level.lower()]:
                return False
        return True


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value if value and not re.search(r"[\s\"=]", value) else json.dumps(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def format_line(line: str) -> str:
    """A readable rendering: `TIME LEVEL event [server] key=value …` (raw when not JSON)."""
    event = parse(line)
    if event is None:
        return line
    ts = str(event.get("ts", ""))
    when = ts.replace("T", " ").removesuffix("Z")[:23]
    level = str(event.get("level", "")).upper()
    head = f"{when} {level:<7} {event.get('event', '')}"
    if event.get("server") is not None:
        head += f" [{event['server']}]"
    rest = [f"{key}={_value(value)}" for key, value in event.items() if key not in _FIXED]
    if event.get("actor") is not None:
        rest.append(f"actor={event['actor']}")
    return head + ("  " + " ".join(rest) if rest else "")


def log_files(path: Path) -> list[Path]:
    """The log and its rotated copies that exist, oldest first."""
    rotated = []
    for candidate in path.parent.glob(f"{path.name}.*"):
        suffix = candidate.name[len(path.name) + 1 :]
        if suffix.isdigit():
            rotated.append((int(suffix), candidate))
    files = [p for _, p in sorted(rotated, reverse=True)]
    return [*files, path] if path.exists() else files


def _lines_of(path: Path, limit: int | None = None) -> Iterator[str]:
    """The whole lines of `path`, reading at most `limit` bytes when given."""
    try:
        with path.open("rb") as handle:
            data = handle.read() if limit is None else handle.read(limit)
    except FileNotFoundError:
        return
    *whole, _partial = data.decode("utf-8", errors="replace").split("\n")
    yield from whole


def current_size(path: Path) -> int:
    """The log's size now: where `last_lines` stops and a `Follower` starts."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def last_lines(path: Path, keep: LogFilter, count: int | None, *, upto: int | None = None) -> list[str]:
    """The last `count` matching lines over the rotated copies and the log (None: all).

    Args:
        path: The log file.
        keep: Which lines to take.
        count: How many of the last matching lines to return; None for all.
        upto: Read the current log only up to this many bytes (see `current_size`).
    """
    if count == 0:
        return []
    found: deque[str] = deque(maxlen=count)
    for file in log_files(path):
        for line in _lines_of(file, upto if file == path else None):
            if keep.accepts(line):
                found.append(line)
    return list(found)


#: Bytes at the end of the log that `tail_events` reads.
TAIL_BYTES = 64 * 1024


def tail_events(path: Path, level: str | None, count: int) -> list[dict[str, Any]]:
    """The last `count` events at `level` and above, oldest first (the status page's log).

    Reads only the last `TAIL_BYTES` of the current log and parses lines from the end
    until `count` match, so its cost grows with neither the log nor a busy instance;
    fewer events come back when fewer lines match there.
    """
    if level is not None:
        LogFilter(level=level)  # an unknown level is refused (ValueError) as `logs` refuses it
    least = LEVELS[level.lower()] if level is not None else 0
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read(TAIL_BYTES)
    except FileNotFoundError:
        return []
    lines = data.decode("utf-8", errors="replace").split("\n")
    whole = lines[1:-1] if size > TAIL_BYTES else lines[:-1]  # a line cut at either end is left out
    found: list[dict[str, Any]] = []
    for line in reversed(whole):
        event = parse(line)
        if event is not None and LEVELS.get(str(event.get("level", "")).lower(), 0) >= least:
            found.append(event)
            if len(found) == count:
                break
    return found[::-1]


class Follower:
    """Reads whole lines appended to a log file, across rotation and truncation.

    Start it at the offset where the reading of the existing lines stopped
    (`current_size` before `last_lines`), so no line between the two is lost or doubled.
    """

    def __init__(self, path: Path, *, offset: int = 0) -> None:
        self.path = path
        self._file: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None
        self._partial = b""
        self._open(offset)

    def _open(self, offset: int) -> None:
        self._partial = b""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            self._file, self._identity = None, None
            return
        info = os.fstat(handle.fileno())
        handle.seek(min(offset, info.st_size))
        self._file, self._identity = handle, (info.st_dev, info.st_ino)

    def _drain(self) -> list[str]:
        if self._file is None:
            return []
        *whole, self._partial = (self._partial + self._file.read()).split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in whole]

    def poll(self) -> list[str]:
        """Every whole line appended since the last poll (possibly none)."""
        lines = self._drain()
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return lines  # between a rotation's rename and the new file: look again later
        if (info.st_dev, info.st_ino) != self._identity:
            lines += self._drain()  # the last lines of the file rotated away
            if self._partial:
                lines.append(self._partial.decode("utf-8", errors="replace"))
            self.close()
            self._open(0)
            lines += self._drain()
        elif self._file is not None and info.st_size < self._file.tell():
            self._file.seek(0)  # truncated in place
            self._partial = b""
            lines += self._drain()
        return lines

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
