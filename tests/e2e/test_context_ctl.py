"""`assernctl context status|search|reindex` and `assernctl status` with a real context server.

A detached instance (`assern daemon`) serves a `builtin = "context"` backend over a
small project holding a `.env` secret: each command's text and `--json` output, a file
changed behind the index's back (same size, same mtime: the watcher's check cannot see
it) found only after `context reindex`, `--full` and `--no-wait`; then, the instance
stopped, what the commands say without it (a search starts the context server for
itself); and the bad input: a blank query, no context server configured.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv
from instances import ctl, daemon, err, out, reap, wait_until  # noqa: F401 - reap: autouse fixture

pytestmark = pytest.mark.e2e

NOT_CONFIGURED = 'no context server is configured (add a [servers.NAME] table with builtin = "context")'
SECRET = "zq-ctl-secret-41c9d0e2b7"

PROJECT = {
    "src/retry.py": (
        "class RetryPolicy:\n"
        '    """Decides how long to wait between attempts."""\n\n'
        "    def decide_backoff(self, attempt: int) -> float:\n"
        "        return min(2.0 ** attempt, 60.0)  # wombat\n"
    ),
    "src/login.py": "def login(user):\n    return RetryPolicy().decide_backoff(0)\n",
    "README.md": "# Demo\n\nA project with a retry policy.\n",
    ".env": f"API_KEY={SECRET}\n",
}


def _project(root: Path) -> None:
    for name, text in PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def _json(env: AssernEnv, *args: str) -> Any:
    done = await ctl(env, *args, "--json")
    assert done.returncode == 0, err(done)
    return json.loads(done.stdout)


def _run(env: AssernEnv, *args: str) -> subprocess.CompletedProcess[bytes]:
    from instances import assernctl_command

    return subprocess.run(
        [assernctl_command(), *args], env=env.env, cwd=env.work, capture_output=True, timeout=60, check=False
    )


def _current(env: AssernEnv, config: Path) -> bool:
    done = _run(env, "context", "status", "--config", str(config), "--json")
    if done.returncode != 0:
        return False
    server = json.loads(done.stdout)["servers"][0]
    return bool(server.get("phase") == "current" and server.get("watcher") == "watching")


async def test_status_search_and_reindex_through_the_instance(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    _project(assern_env.work)
    # ranked by words alone (the default without the semantic extra), so that a word
    # found nowhere finds nothing: the meaning would always name a nearest file
    assern_env.env["ASSERN_CONTEXT_RANKING"] = "reranked"
    config = write_config('[servers.code]\nbuiltin = "context"\nroot = "work"\n')
    at = ("--config", str(config))
    printed: list[str] = []
    async with daemon(assern_env, *at):
        await wait_until(lambda: _current(assern_env, config), limit=60, interval=0.2)

        # assernctl status: the backend's index state in its section, and in --json
        done = await ctl(assern_env, "status", *at)
        assert done.returncode == 0, err(done)
        printed.append(out(done))
        assert "code: index 3 files, 4 chunks, 0 pending, watcher watching; current" in out(done)
        doc = await _json(assern_env, "status", *at)
        printed.append(json.dumps(doc))
        (backend,) = doc["backends"]
        assert backend["context"]["files"] == 3
        assert backend["context"]["watcher"] == "watching"
        assert backend["context"]["pid"] == backend["pid"]

        # context status, text and --json
        done = await ctl(assern_env, "context", "status", *at)
        assert done.returncode == 0, err(done)
        text = out(done)
        printed.append(text)
        root = str(assern_env.work)
        assert text.startswith(f"code: {root} (running, pid {backend['pid']})\n")
        for line in ("  files     3 indexed", "  chunks    4", "  pending   0", "  watcher   watching"):
            assert line + "\n" in text
        assert "  index     current, updated " in text
        status = await _json(assern_env, "context", "status", *at)
        printed.append(json.dumps(status))
        (server,) = status["servers"]
        assert status["instance"]["pid"] is not None
        assert (server["server"], server["state"], server["root"]) == ("code", "ready", root)
        assert (server["files"], server["chunks"], server["pending"]) == (3, 4, 0)
        assert server["size_bytes"] > 0
        assert await trio.Path(server["database"]).is_file()
        assert server["last_index"]["files"] == 3
        assert server["last_index"]["seconds"] >= 0
        assert server["last_update"] > 0

        # --watch returns once every index is current (no terminal: no bar drawn)
        done = await ctl(assern_env, "context", "status", "--watch", *at)
        assert done.returncode == 0, err(done)
        assert "  watcher   watching" in out(done)

        # context search: the semantic_search ranking, text and --json
        done = await ctl(assern_env, "context", "search", "where", "is", "the", "backoff", "decided", *at)
        assert done.returncode == 0, err(done)
        printed.append(out(done))
        lines = out(done).splitlines()
        assert lines[0] == "code: 2 result(s), 3 files indexed"
        assert lines[1].split() == [lines[1].split()[0], "src/retry.py:4-5", "RetryPolicy.decide_backoff"]
        found = await _json(assern_env, "context", "search", "backoff", "--top-k", "1", *at)
        printed.append(json.dumps(found))
        (answer,) = found["servers"]
        assert answer["index"] == {"files": 3, "pending": 0}
        assert [(r["path"], r["start_line"], r["end_line"], r["symbol"]) for r in answer["results"]] == [
            ("src/retry.py", 4, 5, "RetryPolicy.decide_backoff")
        ]
        assert answer["results"][0]["score"] > 0
        for query in (SECRET, "API_KEY"):
            secret = await _json(assern_env, "context", "search", query, *at)
            printed.append(json.dumps(secret["servers"]))  # the query itself is echoed
            assert secret["servers"][0]["results"] == []

        # a change the index cannot see (same size, same mtime) is found by reindex alone
        path = assern_env.work / "src" / "retry.py"
        before = path.stat()
        path.write_text(PROJECT["src/retry.py"].replace("wombat", "quokka"))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        await trio.sleep(1.0)  # the watcher's events of that write are taken (debounce: 0.3 s)
        assert _finds(assern_env, config, "wombat")
        assert not _finds(assern_env, config, "quokka")
        done = await ctl(assern_env, "context", "reindex", *at)
        assert done.returncode == 0, err(done)
        assert out(done).startswith("code: reindex done in ")
        assert f"3 files indexed, 4 chunks ({root})" in out(done)
        assert _finds(assern_env, config, "quokka")
        assert not _finds(assern_env, config, "wombat")

        # rows removed from the database come back with a reindex
        database = Path(server["database"])
        with sqlite3.connect(database) as db:
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("DELETE FROM files WHERE path = 'src/login.py'")
        db.close()
        assert (await _json(assern_env, "context", "status", *at))["servers"][0]["files"] == 2
        reindexed = await _json(assern_env, "context", "reindex", *at)
        assert reindexed["done"] is True
        assert [(s["server"], s["files"], s["full"]) for s in reindexed["servers"]] == [("code", 3, False)]

        # --full rebuilds; --no-wait only starts
        done = await ctl(assern_env, "context", "reindex", "--full", *at)
        assert done.returncode == 0, err(done)
        assert "3 files indexed" in out(done)
        started = await _json(assern_env, "context", "reindex", "--no-wait", "--server", "code", *at)
        assert started["done"] is False
        assert started["servers"][0]["server"] == "code"
        await wait_until(lambda: _current(assern_env, config), limit=30, interval=0.2)
        done = await ctl(assern_env, "context", "reindex", "--server", "nope", *at)
        assert done.returncode == 1
        assert "'nope' is not a context server (context servers: code)" in err(done)

        # a stopped context server: said as such, and not asked to reindex
        done = await ctl(assern_env, "stop", "code", *at)
        assert done.returncode == 0, err(done)
        done = await ctl(assern_env, "context", "reindex", *at)
        assert done.returncode == 1
        assert "the context server 'code' is not running (state: stopped)" in err(done)
        done = await ctl(assern_env, "context", "status", *at)
        assert done.returncode == 0, err(done)
        assert f"code: {root} (stopped)\n" in out(done)
        assert "  watcher   not running\n" in out(done)
        assert "watcher not running; as the last run left it" in out(await ctl(assern_env, "status", *at))

        done = await ctl(assern_env, "shutdown", *at)
        assert done.returncode == 0, err(done)

    # no instance: the index as it was left, said as such
    done = await ctl(assern_env, "context", "status", *at)
    assert done.returncode == 0, err(done)
    printed.append(out(done))
    assert "no assern instance runs for this configuration" in err(done)
    assert "code: " + root + " (not running)\n" in out(done)
    assert "  watcher   not running\n" in out(done)
    assert "  files     3 indexed\n" in out(done)
    offline = await _json(assern_env, "context", "status", *at)
    assert offline["instance"] is None
    assert offline["servers"][0]["files"] == 3
    done = await ctl(assern_env, "context", "reindex", *at)
    assert done.returncode == 1
    assert "no assern instance runs for this configuration" in err(done)
    assert "the next start reindexes anyway" in err(done)

    assert not any(SECRET in text for text in printed)


def _finds(env: AssernEnv, config: Path, word: str) -> bool:
    done = _run(env, "context", "search", word, "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr.decode()
    return bool(json.loads(done.stdout)["servers"][0]["results"])


async def test_bad_input_is_refused_clearly(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config('[servers.code]\nbuiltin = "context"\nroot = "work"\n')
    at = ("--config", str(config))
    for query in ("", "   "):
        done = await ctl(assern_env, "context", "search", query, *at)
        assert done.returncode == 2
        assert err(done) == "assernctl: context search: the query is blank (say what to look for)\n"
    done = await ctl(assern_env, "context", "search", "x", "--top-k", "500", *at)
    assert (done.returncode, err(done)) == (
        2,
        "assernctl: context search: --top-k must be from 1 to 50, not 500\n",
    )
    # configured, never started: no database yet
    done = await ctl(assern_env, "context", "status", *at)
    assert done.returncode == 0, err(done)
    assert "  index     none yet: the context server builds it when it starts\n" in out(done)
    # no instance: the context server is started for the search, builds its index first
    _project(assern_env.work)
    found = await _json(assern_env, "context", "search", "backoff", *at)
    assert found["servers"][0]["index"] == {"files": 3, "pending": 0}
    assert found["servers"][0]["results"][0]["path"] == "src/retry.py"

    other = write_config('[servers.time]\ncommand = "true"\n')
    for command in (("status",), ("search", "x"), ("reindex",)):
        done = await ctl(assern_env, "context", *command, "--config", str(other))
        assert done.returncode == 1, command
        if command != ("reindex",):
            assert err(done) == f"assernctl: {NOT_CONFIGURED}\n"
        else:
            assert "no assern instance runs" in err(done)
