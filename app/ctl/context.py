"""`assernctl context status|search|reindex`: the builtin context servers' indexes.

`status` shows each context server's index: files, chunks, database size, last update,
pending files, the watcher's state and, while an index runs, its progress. With an
instance running, the figures are the live ones (the instance reads what each context
process publishes in its database, assern.context.state); without one, they are what
each configured context server's database holds, as the last run left it (the watcher is
then "not running"). `--watch` follows the indexes with a progress bar until every one
is current.

`search` ranks as the `semantic_search` tool does: it is that tool, called through the
running instance (as `assernctl call` would), else on the context servers started for
this one search (direct mode, as `assernctl call` does), once each has brought its
index in step.

`reindex` asks the running context servers to re-check their whole root (every file
hashed again, what changed indexed, what is gone dropped; `--full` rebuilds the
database from scratch), and follows the reindex with a progress bar until it is done,
for at most `--timeout` seconds (`REINDEX_TIMEOUT` by default: past it, it says that the
reindex goes on in the background and exits with status 1); `--no-wait` only starts it.

With the `assern[semantic]` extra, `status` also shows the vectors' state (published by
the context process, assern.context.vectors): how many chunks and files still wait for
their vectors, ranked by their words alone meanwhile.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assern.actors.listener.context_index import context_servers, index_entry, progress_line, read_index
from assern.app.control_client import ControlError
from assern.app.ctl.common import Usage, find_instance, no_instance, print_json
from assern.app.running import environ
from assern.supervisor.io.reaper import process_alive

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence

    from assern.actors.config.spec import ResolvedConfig
    from assern.app.ctl.common import Instance

#: Seconds between two looks at the databases while following an index.
POLL = 0.2
#: `semantic_search`'s bounds for `top_k` (context/tools.py).
TOP_K = (1, 50)
NOT_CONFIGURED = 'no context server is configured (add a [servers.NAME] table with builtin = "context")'


#: Seconds `reindex` follows a reindex before it leaves it to go on in the background.
REINDEX_TIMEOUT = 600.0


class Failed(Exception):
    """A command that cannot be done; the message says why (exit status 1)."""


class TimedOut(Failed):
    """`follow` gave up waiting (what was still waiting is in `waiting`)."""

    def __init__(self, message: str, waiting: Sequence[str]) -> None:
        super().__init__(message)
        self.waiting = list(waiting)


def cmd_context(args: argparse.Namespace) -> int:
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "status": cmd_context_status,
        "search": cmd_context_search,
        "reindex": cmd_context_reindex,
    }
    try:
        return commands[args.context_command](args)
    except (Failed, LookupError) as exc:
        print(f"assernctl: {exc.args[0]}", file=sys.stderr)
        return 1
    except ControlError as exc:
        print(f"assernctl: {exc.message}", file=sys.stderr)
        return 1


# -- status ---------------------------------------------------------------------------


def _entries(args: argparse.Namespace) -> tuple[Instance | None, list[dict[str, Any]]]:
    """The running instance (if any) and one entry per context server (of `--server`)."""
    config, instance = find_instance(args)
    entries: list[dict[str, Any]] = []
    if instance is not None:
        doc = instance.ask("status")
        entries = [
            {"server": backend["name"], "state": backend["state"], "pid": backend.get("pid")}
            | backend["context"]
            for backend in doc.get("backends") or ()
            if "context" in backend
        ]
    elif config is not None:
        env = environ()
        for name, found in context_servers(config).items():
            entries.append({"server": name, "state": "not running", "pid": None} | index_entry(found, env))
    if not entries and instance is None and config is None:
        raise Failed(no_instance(config))
    if not entries:
        raise Failed(NOT_CONFIGURED + (" in the running instance" if instance is not None else ""))
    server = getattr(args, "server", None)
    if server is not None:
        entries = [entry for entry in entries if entry["server"] == server]
        if not entries:
            raise Failed(f"'{server}' is not a context server")
    for entry in entries:
        _settle(entry)
    return instance, entries


def _settle(entry: dict[str, Any]) -> None:
    """What a stopped process left in its database is no live state: say so."""
    if entry["state"] == "ready":
        return
    entry["watcher"] = "not running"
    if entry.get("phase") in ("starting", "indexing"):
        entry["phase"] = "interrupted"


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def _when(epoch: Any) -> str:
    if not isinstance(epoch, int | float):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def entry_lines(entry: Mapping[str, Any], *, now: float | None = None) -> list[str]:
    """The readable form of one context server's status entry."""
    running = f"running, pid {entry['pid']}" if entry["state"] == "ready" else entry["state"]
    lines = [f"{entry['server']}: {entry['root']} ({running})"]
    if not entry.get("indexed"):
        lines.append("  index     none yet: the context server builds it when it starts")
        lines.append(f"  database  {entry['database']} (not created yet)")
        return lines
    if entry.get("phase") == "interrupted":
        index = "interrupted: the index goes on where it stopped at the next start"
    else:
        index = progress_line(entry, now=now)
    lines.append(f"  index     {index}")
    if "error" not in entry:
        skipped = f" ({entry['skipped']} more left out: binary, too large or unreadable)"
        lines.append(f"  files     {entry['files']} indexed{skipped if entry.get('skipped') else ''}")
        lines.append(f"  chunks    {entry['chunks']}")
        lines.append(f"  pending   {entry.get('pending', 0)}")
        lines.append(f"  watcher   {entry.get('watcher', '-')}")
        lines.append(f"  updated   {_when(entry.get('last_update'))}")
        last = entry.get("last_index")
        if isinstance(last, dict):
            lines.append(
                f"  last run  {last.get('files', 0)} files (re)read in {last.get('seconds', 0)} s, "
                f"done {_when(last.get('finished_at'))}"
            )
    vectors = vectors_line(entry.get("vectors"), running=entry["state"] == "ready")
    if vectors is not None and "error" not in entry:
        lines.append(f"  vectors   {vectors}")
    lines.append(f"  database  {entry['database']}, {_size(entry.get('size_bytes', 0))}")
    return lines


def vectors_line(vectors: Any, *, running: bool) -> str | None:
    """Where the vectors stand (the `vectors` value a context process publishes), for
    people; None when the ranking uses none (no semantic extra)."""
    if not isinstance(vectors, dict):
        return None
    chunks, state = vectors.get("chunks", 0), vectors.get("state")
    files, waiting = vectors.get("pending_files", 0), vectors.get("pending_chunks", 0)
    if not running:
        return f"{chunks} chunks with a vector when the server last ran"
    if state == "loading":
        return "loading the stored vectors: ranked by words alone until they are in"
    if state == "waiting":
        return f"{chunks} chunks with a vector; the rest wait for the index by words to be complete"
    if state == "embedding" or waiting:
        return (
            f"{chunks} chunks with a vector, {waiting} chunks of {files} files waiting "
            "(ranked by words alone until theirs is computed)"
        )
    return f"{chunks} chunks with a vector, none waiting (ranked by words and meaning)"


def cmd_context_status(args: argparse.Namespace) -> int:
    instance, entries = _entries(args)
    if args.watch:
        follow(entries, until=_current, label="index")
        instance, entries = _entries(args)
    if args.json:
        print_json({"instance": _instance_json(instance), "servers": entries})
        return 0
    if instance is None:
        print(
            "(no assern instance runs for this configuration: the figures are what each index "
            "held when its server last ran)",
            file=sys.stderr,
        )
    print("\n\n".join("\n".join(entry_lines(entry)) for entry in entries))
    return 0


def _instance_json(instance: Instance | None) -> dict[str, Any] | None:
    return None if instance is None else {"pid": instance.pid, "slot": instance.slot.name}


# -- following an index ---------------------------------------------------------------


def _current(entry: Mapping[str, Any], found: Mapping[str, Any]) -> bool:
    return found.get("phase") == "current"


def _alive(pid: Any) -> bool:
    return isinstance(pid, int) and process_alive(pid)


def follow(
    entries: Sequence[Mapping[str, Any]],
    *,
    until: Callable[[Mapping[str, Any], Mapping[str, Any]], bool],
    label: str,
    timeout: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Watch each entry's database until `until(entry, what it holds)` is true for all,
    with a progress bar per server on a terminal (tqdm; nothing elsewhere), for at most
    `timeout` seconds (None: no bound).

    Returns:
        What each database held last, by server.

    Raises:
        Failed: a context server stopped meanwhile.
        TimedOut: `timeout` passed first.
    """
    from tqdm import tqdm  # only when following: the other commands answer faster without it

    bars: dict[str, Any] = {}
    last: dict[str, dict[str, Any]] = {}
    waiting = [entry for entry in entries if entry["state"] == "ready"]
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while waiting:
            if deadline is not None and time.monotonic() >= deadline:
                names = [entry["server"] for entry in waiting]
                raise TimedOut(f"still running after {timeout:g} s: {', '.join(names)}", names)
            for entry in list(waiting):
                name = entry["server"]
                found = read_index(Path(entry["database"])) or {}
                last[name] = found
                progress = found.get("progress")
                if found.get("phase") == "indexing" and isinstance(progress, dict):
                    bar = bars.get(name)
                    if bar is None or bar.total != progress.get("total"):
                        if bar is not None:
                            bar.close()
                        bar = bars[name] = tqdm(
                            total=progress.get("total"), desc=f"{name} {label}", unit="file", disable=None
                        )
                    bar.update(int(progress.get("done", 0)) - bar.n)
                if until(entry, found):
                    bar = bars.get(name)
                    if bar is not None:
                        bar.update((bar.total or 0) - bar.n)
                    waiting.remove(entry)
                elif not _alive(entry.get("pid")):
                    raise Failed(
                        f"the context server '{name}' stopped (see `assernctl logs --server {name}`)"
                    )
            if waiting:
                time.sleep(POLL)
    finally:
        for bar in bars.values():
            bar.close()
    return last


# -- search ---------------------------------------------------------------------------


def _arguments(args: argparse.Namespace) -> dict[str, Any]:
    query = " ".join(args.query)
    if not query.strip():
        raise Usage("context search: the query is blank (say what to look for)")
    if args.top_k is not None and not TOP_K[0] <= args.top_k <= TOP_K[1]:
        raise Usage(f"context search: --top-k must be from {TOP_K[0]} to {TOP_K[1]}, not {args.top_k}")
    found: dict[str, Any] = {"query": query}
    if args.top_k is not None:
        found["top_k"] = args.top_k
    if args.path is not None:
        found["path"] = args.path
    return found


def _servers(config: ResolvedConfig | None, server: str | None) -> list[str]:
    names = list(context_servers(config)) if config is not None else []
    if not names:
        raise Failed(NOT_CONFIGURED)
    if server is not None:
        if server not in names:
            raise Failed(f"'{server}' is not a context server (context servers: {', '.join(names)})")
        return [server]
    return names


def _search_running(instance: Instance, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    answer = instance.ask(
        "call",
        timeout=60.0,
        server=name,
        tool="semantic_search",
        arguments=dict(arguments),
    )
    result = answer["result"]
    if result.get("isError"):
        text = " ".join(block.get("text", "") for block in result.get("content") or ())
        raise Failed(f"{name}: {text}")
    structured: dict[str, Any] = result["structuredContent"]
    return structured


#: Seconds a search without an instance waits for the context server it starts to bring
#: its index in step (it answers from what is indexed by then).
DIRECT_WAIT = 120.0


def _search_direct(
    config: ResolvedConfig, names: Sequence[str], arguments: Mapping[str, Any], log_level: str
) -> list[dict[str, Any]]:
    """`semantic_search` on context servers started for this search (no instance runs):
    each brings its index in step first (what changed since it last ran), then answers."""
    import attrs
    import trio

    from assern.actors.config.home import default_assern_home
    from assern.actors.jsonrpc.errors import RpcError
    from assern.actors.listener.inproc import call_tool
    from assern.app.running import with_tree
    from assern.supervisor.io.logs import configure_logging

    async def body(tree: Any) -> list[dict[str, Any]]:
        answers = []
        for name in names:
            routes = [r for r in tree.catalog.value.tools.values() if r.server == name]
            tool = next((r.name for r in routes if r.original == "semantic_search"), None)
            if tool is None:
                return [{"error": f"{name}: the context server did not start (see `assernctl logs`)"}]
            with trio.move_on_after(DIRECT_WAIT):
                while True:
                    try:
                        result = await call_tool(tree.shared, tool, dict(arguments), "assernctl")
                    except RpcError as exc:
                        return [{"error": f"{name}: {exc.message}"}]
                    structured = result.get("structuredContent")
                    if result.get("isError") or structured is None or not structured["index"]["pending"]:
                        break
                    await trio.sleep(POLL)  # the index is built by another process
            if result.get("isError") or structured is None:
                text = " ".join(block.get("text", "") for block in result.get("content") or ())
                return [{"error": f"{name}: {text}"}]
            answers.append({"server": name, **structured})
        return answers

    chosen = attrs.evolve(config, servers={name: config.servers[name] for name in names})
    with configure_logging(default_assern_home(environ()) / "logs", level=log_level):
        found: list[dict[str, Any]] = trio.run(with_tree, chosen, lambda: chosen, body)
    for answer in found:
        if "error" in answer:
            raise Failed(answer["error"])
    return found


def result_lines(name: str, found: Mapping[str, Any]) -> list[str]:
    index = found.get("index") or {}
    head = f"{name}: {len(found['results'])} result(s), {index.get('files', 0)} files indexed"
    if index.get("pending"):
        head += f", {index['pending']} pending (the index is not complete yet)"
    lines = [head]
    for result in found["results"]:
        where = f"{result['path']}:{result['start_line']}-{result['end_line']}"
        symbol = f"  {result['symbol']}" if result.get("symbol") else ""
        lines.append(f"  {result['score']:>8.4f}  {where}{symbol}")
    return lines


def cmd_context_search(args: argparse.Namespace) -> int:
    arguments = _arguments(args)
    config, instance = find_instance(args)
    if instance is not None:
        doc = instance.ask("status")
        running = [b["name"] for b in doc.get("backends") or () if "context" in b]
        if not running:
            raise Failed(NOT_CONFIGURED + " in the running instance")
        if args.server is not None and args.server not in running:
            raise Failed(f"'{args.server}' is not a context server (context servers: {', '.join(running)})")
        names = [args.server] if args.server is not None else running
        answers = [{"server": n, **_search_running(instance, n, arguments)} for n in names]
    else:
        names = _servers(config, args.server)
        assert config is not None
        print(
            "(no assern instance runs for this configuration: the context servers were started "
            "for this search)",
            file=sys.stderr,
        )
        answers = _search_direct(config, names, arguments, args.log_level)
    if args.json:
        print_json({"query": arguments["query"], "servers": answers})
    else:
        print("\n\n".join("\n".join(result_lines(a["server"], a)) for a in answers))
    return 0


# -- reindex --------------------------------------------------------------------------


def reindex_timeout(args: argparse.Namespace) -> float | None:
    """How long `reindex` follows the reindex (None with `--no-wait`).

    Raises:
        Usage: a timeout that is not a positive number of seconds, or one given with
            `--no-wait`.
    """
    timeout: float | None = getattr(args, "timeout", None)
    if timeout is not None and args.no_wait:
        raise Usage("context reindex: --timeout and --no-wait do not go together (--no-wait does not wait)")
    if args.no_wait:
        return None
    if timeout is None:
        return REINDEX_TIMEOUT
    if not timeout > 0 or timeout == float("inf"):
        raise Usage(f"context reindex: --timeout must be a positive number of seconds, not {timeout:g}")
    return timeout


def cmd_context_reindex(args: argparse.Namespace) -> int:
    timeout = reindex_timeout(args)
    config, instance = find_instance(args)
    if instance is None:
        raise Failed(
            no_instance(config) + ": a context server re-checks its whole root each time it starts, "
            "so the next start reindexes anyway"
        )
    fields: dict[str, Any] = {"full": args.full}
    if args.server is not None:
        fields["server"] = args.server
    asked = instance.ask("context_reindex", **fields)["servers"]
    if args.no_wait:
        if args.json:
            print_json({"servers": asked, "done": False})
        else:
            for item in asked:
                print(f"{item['server']}: reindex of {item['root']} started (pid {item['pid']})")
        return 0
    entries = [{**item, "state": "ready"} for item in asked]
    try:
        last = follow(entries, until=_reindexed, label="reindex", timeout=timeout)
    except TimedOut as exc:
        if args.json:
            print_json({"servers": asked, "done": False, "timed_out": exc.waiting})
        raise Failed(
            f"the reindex is {exc.args[0]}; it goes on in the background "
            "(follow it with `assernctl context status --watch`)"
        ) from None
    done = []
    for item in asked:
        found = last.get(item["server"]) or {}
        done.append(
            {
                **item,
                "files": found.get("files"),
                "chunks": found.get("chunks"),
                "last_index": found.get("last_index"),
            }
        )
    if args.json:
        print_json({"servers": done, "done": True})
    else:
        for item in done:
            seconds = (item.get("last_index") or {}).get("seconds", "?")
            print(
                f"{item['server']}: reindex done in {seconds} s: {item['files']} files indexed, "
                f"{item['chunks']} chunks ({item['root']})"
            )
    return 0


def _reindexed(entry: Mapping[str, Any], found: Mapping[str, Any]) -> bool:
    return found.get("pid") == entry["pid"] and int(found.get("reindex_done") or 0) >= int(entry["reindex"])
