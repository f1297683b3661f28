"""One structlog pipeline to a rotating JSON-lines file; never stdout (that is the MCP wire).

structlog events and the stdlib loggers of the SDK go through the same processors.
Secrets are masked by `redact_secrets` before anything is rendered.

Records are written from the trio thread itself: one small append to the page cache
costs a few microseconds, while a queue to a writer thread made every call pay for a
GIL hand-off (measured: about 1 ms a call, see ops/bench/call_latency.py).
"""

from __future__ import annotations

import logging
import logging.handlers
import re
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

LOG_FILE = "assern.log"

_SECRET_KEYS = re.compile(
    r"(?i)^(env|headers|authorization|token|secret|password|api[_-]?key|.*_token|.*_secret)$"
)


def redact(value: str) -> str:
    """Show a secret's first two characters only: `ab…(redacted)`."""
    return f"{value[:2]}…(redacted)" if len(value) > 4 else "…(redacted)"


def redact_secrets(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Mask values under secret-looking keys; env and header maps keep their keys only."""
    for key, value in list(event.items()):
        if not _SECRET_KEYS.match(key):
            continue
        if isinstance(value, dict):
            event[key] = sorted(value)
        elif isinstance(value, str):
            event[key] = redact(value)
        else:
            event[key] = "(redacted)"
    return event


def shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        redact_secrets,
        structlog.processors.dict_tracebacks,
    ]


@contextmanager
def configure_logging(
    log_dir: Path, *, level: str = "info", max_bytes: int = 10_000_000, backups: int = 5
) -> Iterator[Path]:
    """Route every log event to `log_dir/assern.log` for the duration of the block."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / LOG_FILE
    file_handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
    )
    file_handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared_processors(),
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(default=str),
            ],
        )
    )
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    root.handlers = [file_handler]
    root.setLevel(level.upper())
    structlog.configure(
        processors=[
            *shared_processors(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    try:
        yield path
    finally:
        file_handler.close()
        root.handlers, level_saved = saved
        root.setLevel(level_saved)


def get_logger(**bound: Any) -> Any:
    return structlog.get_logger(**bound)
