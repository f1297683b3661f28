"""A session's first answers, kept so that the next identical start is answered at once
while the daemon it had to start is still importing.

A client's `assern serve` that finds no daemon starts one (app/daemon/launch.py); the
daemon needs about half a second before it can welcome anyone, and some clients leave out
of their first turn a server whose lists are not in yet. So the resuming bridge
(app/handover.py) keeps, for each start's key (`hint_key`: its arguments, folder,
interpreter, `ASSERN_HOME`, `HOME`, version), what the daemon answered its client:

- `$ASSERN_HOME/cache/first-answers/<key digest>.json`, the stamp: the key, the daemon's
  build, and what the daemon's resolution of that connection depended on (every watched
  file's signature and a digest of the variables they refer to: app/hint.py's
  `resolution_stamp`, sent in the welcome). The shim writes it when the welcome's stamp
  differs from the one kept, and drops the answers then;
- `<key digest>.answers.json`: per client `initialize` (its params' digest: the same
  client, version and capabilities), the daemon's answer to it and the first page of
  `tools/list`, `prompts/list`, `resources/list` and `resources/templates/list`, as the
  daemon last gave them.

The next start with the same key, no daemon answering, this build, and every stamped file
and variable unchanged (`saved_answers`) starts the daemon and does not wait for it: the
bridge answers the client's `initialize`, its first lists and `ping` from what was kept,
holds every other request until the daemon welcomes it, then replays the session there
(as a resume does) and sends `list_changed` for a list that turned out different.

Standard library only: the quick path and the bridge use it.
"""

from __future__ import annotations

import json
import os

from assern.app.private_file import read_private_json, write_private_json

try:  # the builtin module hashlib wraps (app/session_record.py)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FORMAT = 1
FOLDER = "first-answers"
#: Distinct clients (`initialize` params) whose answers a key keeps; the oldest go first.
MAX_SESSIONS = 8
#: The requests a kept session answers (a list: its first page only).
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


def answer_files(assern_home: str, key: Mapping[str, Any]) -> tuple[str, str]:
    """The stamp file and the answers file kept for a start's `key`."""
    from assern.app.hint import key_digest  # not in the bridge, which only keeps answers

    base = os.path.join(assern_home, "cache", FOLDER, key_digest(key))
    return base + ".json", base + ".answers.json"


def keep_stamp(assern_home: str, key: Mapping[str, Any], build: str, stamp: Mapping[str, Any]) -> str:
    """Record what the daemon's welcome said this start's resolution depended on; the
    answers file to keep its answers in (emptied when the stamp or build changed)."""
    stamp_path, answers_path = answer_files(assern_home, key)
    header = {"format": FORMAT, "key": dict(key), "build": build, **stamp}
    if read_private_json(stamp_path) != json.loads(json.dumps(header)):
        try:
            os.unlink(answers_path)
        except OSError:
            pass
        write_private_json(stamp_path, header)
    return answers_path


def saved_answers(
    assern_home: str, key: Mapping[str, Any], build: str, environ: Mapping[str, str]
) -> str | None:
    """The answers file kept for `key` when it is this build's and nothing the
    resolution depended on changed since; else None."""
    from assern.app.hint import stamp_holds

    stamp_path, answers_path = answer_files(assern_home, key)
    header = read_private_json(stamp_path)
    if not isinstance(header, dict):
        return None
    try:
        if header.get("format") != FORMAT or header["key"] != dict(key) or header["build"] != build:
            return None
        if not stamp_holds(header, environ):
            return None
    except (KeyError, TypeError, AttributeError):
        return None
    return answers_path if os.path.exists(answers_path) else None


def load_sessions(answers_path: str, build: str) -> dict[str, Any]:
    """The sessions an answers file keeps (params digest -> method -> result); empty
    when it is missing, unreadable or another build's."""
    answers = read_private_json(answers_path)
    if not isinstance(answers, dict) or answers.get("build") != build:
        return {}
    sessions = answers.get("sessions")
    return sessions if isinstance(sessions, dict) else {}


def session_key(params: object) -> str:
    """The digest of a client's `initialize` params: what its answers are kept under."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"))
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def keep_answer(answers_path: str, build: str, session: str, method: str, result: object) -> None:
    """Record the daemon's `result` to `method` for the client `session` (`order` keeps
    the clients from the least to the most recently seen; beyond MAX_SESSIONS the least
    recent go)."""
    found = read_private_json(answers_path)
    answers = found if isinstance(found, dict) and found.get("build") == build else {}
    sessions = answers.get("sessions")
    sessions = sessions if isinstance(sessions, dict) else {}
    order = answers.get("order")
    order = [name for name in order if name in sessions] if isinstance(order, list) else list(sessions)
    entry = sessions.get(session)
    entry = entry if isinstance(entry, dict) else {}
    if entry.get(method) == result and order and order[-1] == session:
        return  # kept as it is
    entry[method] = result
    sessions[session] = entry
    order = [name for name in order if name != session] + [session]
    for name in order[:-MAX_SESSIONS]:
        del sessions[name]
    write_private_json(answers_path, {"build": build, "sessions": sessions, "order": order[-MAX_SESSIONS:]})


class EarlyAnswers:
    """Answers a client's first requests from a kept session (see the module)."""

    def __init__(self, sessions: Mapping[str, Any]) -> None:
        self.sessions = sessions
        #: the kept session of the client's `initialize`, once it was answered from one
        self.entry: dict[str, Any] | None = None
        #: requests answered from it (counted by the bridge)
        self.answered = 0

    def result(self, method: str, params: Mapping[str, Any]) -> object:
        """The kept result for a request, or None when it must wait for the daemon."""
        if method == "initialize":
            entry = self.sessions.get(session_key(params))
            if self.entry is None and isinstance(entry, dict) and isinstance(entry.get("initialize"), dict):
                self.entry = entry
                return entry["initialize"]
            return None
        if method == "ping":
            return {}
        if self.entry is None or method not in LISTS or params.get("cursor") is not None:
            return None
        result = self.entry.get(method)
        if not isinstance(result, dict) or result.get("nextCursor") is not None:
            return None
        return result
