"""`python -I -m assern.context --root ROOT`: the context server, an MCP server over stdio.

Built on the official SDK's low-level `Server`, run under trio (anyio's trio backend).
At start it opens (or rebuilds) the root's database, then serves at once while a
background task brings the index in step with the files: the walk and every batch run
in a worker thread (`trio.to_thread.run_sync`), so the trio loop keeps answering and a
search made meanwhile answers from what is indexed so far, saying how much is pending.
Then a file watcher keeps it current (`ContextServer.watch`). The tools' own work
(SQLite, ranking) runs in worker threads too.

Logs are JSON lines on stderr (stdout is the MCP wire); the instance that started the
process keeps them with the backend's other output.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import mcp_types as types
import structlog
import trio
import watchfiles
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from assern.context.fusion import DEFAULT_METHOD, Fusion, Meaning, parse_fusion
from assern.context.index import Indexer, batches, plan
from assern.context.rank import SIGNALS
from assern.context.scan import (
    DEFAULT_MAX_FILE_SIZE,
    IGNORE_FILES,
    ScanRules,
    SecretFilter,
    check_file,
    scan,
)
from assern.context.state import write_state
from assern.context.store import Store, database_path
from assern.context.terms import Terms
from assern.context.tools import READ_ONLY, TOOLS, Answer, Engine, IndexState, ToolError
from assern.context.vectors import Vectorizer, semantic_installed

if TYPE_CHECKING:
    from collections.abc import Mapping

INSTRUCTIONS = (
    "This project's own code and docs, indexed and ranked: semantic_search finds the "
    "chunks (definitions, sections) that answer a question or a name; get_context_for_prompt "
    "gives the best snippets for a task within a token budget; get_file reads a file or "
    "some of its lines. Prefer them to reading whole files."
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m assern.context", description="The context server: an MCP server over stdio."
    )
    parser.add_argument("--root", required=True, help="the folder to index and serve")
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="more files to leave out (gitignore syntax)",
    )
    parser.add_argument(
        "--max-file-size",
        type=int,
        default=DEFAULT_MAX_FILE_SIZE,
        metavar="BYTES",
        help="larger files are left out",
    )
    parser.add_argument("--secret", action="append", default=[], metavar="GLOB", help="more secret files")
    parser.add_argument("--db", help="the database (default: under $ASSERN_HOME/cache/context/)")
    parser.add_argument(
        "--no-watch", action="store_true", help="index once at start, without watching the files afterwards"
    )
    args = parser.parse_args(argv)
    if args.max_file_size < 1:
        parser.error("--max-file-size must be at least 1")
    return args


#: The ranking (docs/context.md): `fused` (the default with the `assern[semantic]`
#: extra), `reranked` (the default without it), and for measuring each step
#: (ops/bench/context/): `lexical` (BM25F alone), `meaning` (the vectors alone) and
#: `fused-norerank` (words and meaning fused, not re-ranked).
RANKING_ENV = "ASSERN_CONTEXT_RANKING"
RANKINGS = ("fused", "reranked", "lexical", "meaning", "fused-norerank")
#: One re-ranking signal to switch off, to measure what it brings (rank.SIGNALS).
DISABLE_ENV = "ASSERN_CONTEXT_RERANK_DISABLE"
#: How the fused rankings fuse: `rrf` or `blend`, optionally `:WEIGHT` (fusion.py).
FUSION_ENV = "ASSERN_CONTEXT_FUSION"


@attrs.frozen(kw_only=True)
class Ranking:
    """The ranking a process was asked for: its name, its re-ranking signals, and whether
    and how it uses the vectors (`meaning`; `fusion` None with them ranks by meaning alone)."""

    mode: str
    signals: tuple[str, ...]
    meaning: bool = False
    fusion: Fusion | None = None


def choose_ranking(environ: dict[str, str], *, semantic: bool) -> Ranking:
    """The ranking `environ` asks for; `semantic`: whether the extra is installed.

    Raises:
        ValueError: an unknown ranking, signal or fusion, or one that needs the extra
            when it is not installed.
    """
    mode = environ.get(RANKING_ENV) or ("fused" if semantic else "reranked")
    if mode not in RANKINGS:
        raise ValueError(f"{RANKING_ENV}={mode!r}: expected one of {', '.join(RANKINGS)}")
    meaning = mode in ("fused", "meaning", "fused-norerank")
    if meaning and not semantic:
        raise ValueError(
            f"{RANKING_ENV}={mode}: ranking by meaning needs the semantic extra "
            "(pip install 'assern[semantic]': wordllama and numpy), which is not installed"
        )
    disabled = environ.get(DISABLE_ENV) or None
    if disabled is not None and disabled not in SIGNALS:
        raise ValueError(f"{DISABLE_ENV}={disabled!r}: expected one of {', '.join(SIGNALS)}")
    fusion = None
    if mode in ("fused", "fused-norerank"):
        try:
            fusion = parse_fusion(environ.get(FUSION_ENV) or DEFAULT_METHOD)
        except ValueError as exc:
            raise ValueError(f"{FUSION_ENV}={exc}") from None
    signals = () if mode in ("lexical", "meaning", "fused-norerank") else SIGNALS
    return Ranking(
        mode=mode,
        signals=tuple(signal for signal in signals if signal != disabled),
        meaning=meaning,
        fusion=fusion,
    )


def assern_home(environ: dict[str, str]) -> Path:
    """`$ASSERN_HOME`, else `~/.valksor/assern` (the instance's rule, actors/config/home.py;
    the instance passes `--db` itself, this is for the process started on its own)."""
    configured = environ.get("ASSERN_HOME")
    home = environ.get("HOME") or os.path.expanduser("~")
    if configured:
        return Path(os.path.join(home, configured[2:]) if configured.startswith("~/") else configured)
    return Path(home) / ".valksor" / "assern"


def configure_logging() -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


log = structlog.get_logger("assern.context")

#: Milliseconds of file events the watcher gathers into one batch (a burst, such as a
#: checkout of many files, arrives as one).
WATCH_DEBOUNCE_MS = 300
#: A batch naming more paths than this walks the whole root instead of judging each.
BURST = 200
#: Milliseconds after which the watcher answers even without events: its first answer
#: says the watches are in place (and a restart waits for it before it counts as current).
WATCH_READY_MS = 100


def classify(
    root: Path, changes: set[tuple[watchfiles.Change, str]], watched: set[str]
) -> tuple[list[str], bool]:
    """The relative paths one batch of events names, and whether it calls for a walk of
    the whole root: more than `BURST` paths, an ignore file, or a folder come or gone."""
    top = os.fspath(root)
    paths = {os.path.relpath(path, top).replace(os.sep, "/") for _, path in changes}
    paths = {path for path in paths if path != "." and not path.startswith("../")}
    walk = len(paths) > BURST or any(
        path.rsplit("/", 1)[-1] in IGNORE_FILES
        or os.path.join(top, path) in watched
        or os.path.isdir(os.path.join(top, path))
        for path in paths
    )
    return sorted(paths), walk


class ContextServer:
    """One root: its store, its index state and the MCP handlers answering from them."""

    def __init__(
        self,
        root: Path,
        rules: ScanRules,
        db: Path,
        *,
        watch: bool = True,
        signals: tuple[str, ...] = SIGNALS,
        ranking: Ranking | None = None,
    ) -> None:
        self.root = root
        self.rules = rules
        self.watch_files = watch
        #: the folders the last walk entered (what the watcher watches)
        self.folders: list[str] = []
        #: the skipped paths already logged
        self.told: set[str] = set()
        #: how many walks of the root were made
        self.walks = 0
        self.store = Store(db)
        if self.store.rebuilt:
            log.warning("context index rebuilt", database=str(db), reason=self.store.rebuilt)
        if self.store.migrated:
            migrated = self.store.migrated
            log.info(
                "context index migrated",
                database=str(db),
                schema_from=migrated.old,
                schema_to=migrated.new,
                seconds=migrated.seconds,
            )
        self.state = IndexState()
        self.secret = SecretFilter(rules.secrets)
        #: the chunks' vectors, when the ranking uses them (vectors.py)
        self.vectors: Vectorizer | None = None
        meaning = None
        if ranking is not None:
            signals = ranking.signals
            if ranking.meaning:
                self.vectors = Vectorizer(self.store, publish=self._publish_vectors)
                meaning = Meaning(self.vectors, ranking.fusion)
        self.engine = Engine(
            root, self.store, Terms(), self.secret, self.state, signals=signals, meaning=meaning
        )
        self.indexer = Indexer(root, self.store, Terms(), max_file_size=rules.max_file_size)
        #: one walk or batch of events at a time (the watcher's, or a reindex asked)
        self.lock = trio.Lock()
        #: reindexes asked (signals received) and done, published for `assernctl`
        self.reindex_asked = 0
        self.reindex_done = 0
        #: the watcher's state as published (state.WATCHER_STATES)
        self.watcher = "starting" if watch else "off"
        self.started_at = round(time.time(), 3)
        #: the indexing under way (`keep_index`): a rebuild cancels it to start again
        self.indexing = trio.CancelScope()
        #: set once the index is first known current (`IndexState.ready`)
        self.current = trio.Event()
        self._recovery = trio.Lock()

    def identity(self) -> dict[str, Any]:
        """What the state table says of the process before a walk of a fresh database
        (at the start, and again after a rebuild): the walk is about to start."""
        return {
            "phase": "starting",
            "pid": os.getpid(),
            "root": str(self.root),
            "started_at": self.started_at,
            "watcher": self.watcher,
            "reindex_asked": self.reindex_asked,
            "reindex_done": self.reindex_done,
            # None: ranked by words alone (no semantic extra, or another ranking chosen)
            "vectors": self.vectors.state_doc() if self.vectors is not None else None,
        }

    def publish(self, **values: Any) -> None:
        """Write what people may read of the index (state.py); blocking. A failure to
        write it is logged, never raised: it must not stop the index."""
        try:
            self.store.run_write(functools.partial(write_state, values=values))
        except sqlite3.Error as exc:
            log.warning("context state not written", error=f"{type(exc).__name__}: {exc}")

    def _publish_vectors(self, doc: Mapping[str, Any]) -> None:
        self.publish(vectors=dict(doc))

    async def announce(self, **values: Any) -> None:
        await trio.to_thread.run_sync(functools.partial(self.publish, **values))

    async def on_signals(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reindex when asked (`assernctl context reindex`, through the instance):
        SIGUSR1 re-checks every file (hashes them, indexes what changed, drops what is
        gone), SIGUSR2 rebuilds the database from scratch first."""
        with trio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2) as received:
            task_status.started()
            async for signum in received:
                full = signum == signal.SIGUSR2
                self.reindex_asked += 1
                asked = self.reindex_asked
                log.info("context reindex asked", full=full)
                await self.announce(reindex_asked=asked)
                generation = self.store.generation
                try:
                    async with self.lock:
                        if full:
                            await trio.to_thread.run_sync(self.store.rebuild, "a full reindex was asked")
                            await self.announce(**self.identity())
                        await self._bring_in_step(rehash=True)
                except sqlite3.DatabaseError as exc:  # found broken: rebuilt, and indexed anew
                    await self.recover(generation, f"{type(exc).__name__}: {exc}")
                self.reindex_done = asked
                await self.announce(reindex_done=asked)

    def _ready(self) -> None:
        self.state.ready = True
        self.current.set()

    async def keep_index(self) -> None:
        """Bring the index in step with the files, then keep it there with a file watcher
        (unless `watch` is off).

        A database found broken or gone while indexing, by a tool call (`answer`) or by
        the check after the start (`check_database`) is rebuilt empty and logged
        (`recover`), and the index is made again from the files: meanwhile the tools
        answer from what is indexed so far, with what is pending.
        """
        while True:
            generation = self.store.generation
            await self.announce(**self.identity())
            broken: sqlite3.DatabaseError | None = None
            with trio.CancelScope() as self.indexing:
                try:
                    if self.watch_files:
                        # the folders first, to watch them; the files are walked (and the
                        # index brought in step) once the watches are in place (`watch`)
                        found = await trio.to_thread.run_sync(
                            functools.partial(scan, self.root, self.rules, secret=self.secret, files=False)
                        )
                        self.folders = found.folders
                        await self.watch()
                    else:
                        await self.bring_in_step()
                        self._ready()
                    await trio.sleep_forever()  # until a rebuild cancels this to index again
                except sqlite3.DatabaseError as exc:
                    broken = exc
            self.state.watching = False
            if broken is not None:
                await self.recover(generation, f"{type(broken).__name__}: {broken}")

    async def recover(self, generation: int, reason: str) -> None:
        """Rebuild the database found broken by a user of `generation` (unless another
        user has done it since), log it, and make the indexing start again."""
        async with self._recovery:
            if self.store.generation != generation:
                return
            log.warning("context index rebuilt", database=str(self.store.path), reason=reason)
            self.state.ready = False  # pending from now until the index is made again
            self.state.complete = False
            await trio.to_thread.run_sync(self.store.rebuild, reason)
            self.walks = 0
            self.indexing.cancel()

    async def check_database(self) -> None:
        """Once the index is current after a start, run the database's `quick_check` (on a
        connection of its own) and rebuild it if it finds damage."""
        await self.current.wait()
        generation = self.store.generation
        try:
            problem = await trio.to_thread.run_sync(self.store.check)
        except sqlite3.DatabaseError as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            await self.recover(generation, problem)

    async def answer(self, tool: str, arguments: dict[str, Any] | None) -> Answer:
        """One tool call, answered in a worker thread. A database found broken or gone is
        rebuilt (`recover`) and the call answered again, from what is indexed so far.

        Raises:
            ToolError: bad arguments or a refused path; or the database still failing.
        """
        generation = self.store.generation
        try:
            return await trio.to_thread.run_sync(self.engine.call, tool, arguments)
        except sqlite3.DatabaseError as exc:
            reason = f"{type(exc).__name__}: {exc}"
        try:
            await self.recover(generation, reason)
            return await trio.to_thread.run_sync(self.engine.call, tool, arguments)
        except (sqlite3.DatabaseError, OSError) as exc:
            raise ToolError(
                f"the index could not be read ({reason}) and is being rebuilt "
                f"({type(exc).__name__}: {exc}); ask again shortly"
            ) from None

    async def watch(self) -> None:
        """Re-index what the file events of the watched folders name, batch by batch.

        Only the folders the walk entered are watched, each on its own (never
        `node_modules/` or another ignored folder). watchfiles coalesces the events of
        `WATCH_DEBOUNCE_MS`; a batch that adds or removes a folder, touches an ignore
        file or holds more than `BURST` paths walks the root again (which also changes
        the watched folders); any other batch re-judges only the paths it names.

        A file saved between a walk and the moment the watches are in place (at the
        start, or after a folder came or went) would be missed: so each time the watches
        are set, once the watcher answers for the first time (events, or
        `WATCH_READY_MS` of none), the root is walked again (stat only); the index counts
        as current (`IndexState.ready`) after the first such walk.
        """
        while True:
            folders = list(self.folders)
            watched = {
                os.path.join(self.root, folder) if folder else os.fspath(self.root) for folder in folders
            }
            try:
                async with contextlib.aclosing(
                    watchfiles.awatch(
                        *sorted(watched),
                        watch_filter=None,
                        recursive=False,
                        debounce=WATCH_DEBOUNCE_MS,
                        rust_timeout=WATCH_READY_MS,
                        yield_on_timeout=True,
                        ignore_permission_denied=True,
                    )
                ) as events:
                    async for changes in events:
                        if not self.state.watching:  # the watches are in place from here on
                            self.state.watching = True
                            log.info("context watcher started", folders=len(watched))
                            self.watcher = "watching"
                            await self.announce(watcher=self.watcher)
                            # what was saved while they were being set (at the start, or
                            # anew for a changed set of folders) is found by a walk now
                            await self.bring_in_step()
                            self._ready()
                            if set(self.folders) != set(folders):
                                break
                        if changes and await self.take(changes, watched):
                            break  # the folders changed: watch the new set
                    else:
                        return
                self.state.watching = False
            except (OSError, RuntimeError) as exc:  # no inotify left, a folder gone meanwhile
                self.state.watching = False
                log.warning("context watcher stopped", error=f"{type(exc).__name__}: {exc}")
                self.watcher = "stopped"
                await self.announce(watcher=self.watcher)
                if not self.state.complete:  # the files were never walked: index them now
                    await self.bring_in_step()
                self._ready()
                return

    async def take(self, changes: set[tuple[watchfiles.Change, str]], watched: set[str]) -> bool:
        """Bring the index in step with one batch of file events; True when the watched
        folders must change."""
        paths, walk = await trio.to_thread.run_sync(classify, self.root, changes, watched)
        if walk:
            before = set(self.folders)
            await self.bring_in_step()
            return set(self.folders) != before
        if paths:
            async with self.lock:
                await trio.to_thread.run_sync(self.reindex, paths)
            # the vectors are not nudged here: they look within `POLL_S`, so their write
            # (under the store's lock) need not meet the search that often follows a save
        return False

    def nudge_vectors(self) -> None:
        """Tell the vectors (if the ranking uses them) that the index changed."""
        if self.vectors is not None:
            self.vectors.nudge()

    def reindex(self, paths: list[str]) -> None:
        """Judge each path again and index, re-index or drop it (blocking)."""
        known = self.store.known()
        kept = [
            found for path in paths if (found := check_file(self.root, self.rules, path, secret=self.secret))
        ]
        kept_paths = {found.path for found in kept}
        todo = plan(kept, {path: known[path] for path in kept_paths if path in known})
        gone = [path for path in paths if path in known and path not in kept_paths]
        problems = self.indexer.run_batch(todo.changed, known, gone)
        for path, problem in problems:
            log.warning("context file not indexed", path=path, problem=problem)
        if todo.changed or gone:
            log.info("context files updated", indexed=len(todo.changed), deleted=len(gone))
            self.publish(last_update=round(time.time(), 3))

    async def bring_in_step(self) -> None:
        """Index what changed since the database last saw the files, one batch per transaction."""
        async with self.lock:
            await self._bring_in_step()

    async def _bring_in_step(self, *, rehash: bool = False) -> None:
        """`bring_in_step`, the lock held; `rehash` reads every file again (a file whose
        size and mtime stayed the same is still hashed, and re-indexed if it changed)."""
        started = time.monotonic()
        found = await trio.to_thread.run_sync(
            functools.partial(scan, self.root, self.rules, secret=self.secret)
        )
        self.folders = found.folders
        for skipped in found.skipped:
            if skipped.path not in self.told:  # once per path and process
                self.told.add(skipped.path)
                log.info("context file skipped", path=skipped.path, reason=skipped.reason)
        known = await trio.to_thread.run_sync(self.store.known)
        todo = plan(found.files, known)
        if rehash:
            todo = attrs.evolve(todo, changed=tuple(found.files))
        self.state.pending = len(todo.changed)
        # the first walk is always told; later ones (the watcher's) only when they find work
        told = self.walks == 0 or rehash or bool(todo.changed or todo.deleted)
        self.walks += 1
        progress = {"total": len(todo.changed), "done": 0, "started_at": round(time.time(), 3)}
        if told:
            await self.announce(phase="indexing", pending=self.state.pending, progress=progress)
        if told:
            log.info(
                "context index starting",
                root=str(self.root),
                files=len(found.files),
                changed=len(todo.changed),
                deleted=len(todo.deleted),
            )
        deleted: tuple[str, ...] = todo.deleted
        for batch in batches(todo.changed) or [[]]:
            problems = await trio.to_thread.run_sync(self.indexer.run_batch, batch, known, deleted)
            deleted = ()
            self.nudge_vectors()
            self.state.pending -= len(batch)
            progress["done"] += len(batch)
            if told:
                await self.announce(pending=self.state.pending, progress=progress)
            for path, problem in problems:
                log.warning("context file not indexed", path=path, problem=problem)
        self.state.complete = True
        if not told:
            return
        files, chunks = await trio.to_thread.run_sync(self.store.counts)
        seconds = round(time.monotonic() - started, 3)
        log.info(
            "context index complete",
            files=files,
            chunks=chunks,
            reindexed=len(todo.changed),
            deleted=len(todo.deleted),
            seconds=seconds,
        )
        now = round(time.time(), 3)
        last_index = {"finished_at": now, "seconds": seconds, "files": len(todo.changed)}
        await self.announce(phase="current", pending=0, last_update=now, last_index=last_index)

    async def list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=tool["description"],
                    input_schema=tool["inputSchema"],
                    output_schema=tool.get("outputSchema"),
                    annotations=types.ToolAnnotations(
                        read_only_hint=READ_ONLY["readOnlyHint"],
                        destructive_hint=READ_ONLY["destructiveHint"],
                        idempotent_hint=READ_ONLY["idempotentHint"],
                        open_world_hint=READ_ONLY["openWorldHint"],
                    ),
                )
                for name, tool in TOOLS.items()
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            answer = await self.answer(params.name, params.arguments)
        except ToolError as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(exc))], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text) for text in answer.texts],
            structured_content=answer.structured,
        )

    def build(self) -> Server[Any]:
        return Server(
            "context",
            version="1.0.0",
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )


async def serve(context: ContextServer) -> None:
    """Serve MCP on stdio while the index is brought in step; close the store at the end."""
    server = context.build()
    options = server.create_initialization_options(NotificationOptions())
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(context.on_signals)
            nursery.start_soon(context.keep_index)
            nursery.start_soon(context.check_database)
            if context.vectors is not None:
                nursery.start_soon(context.vectors.keep)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, options)
            nursery.cancel_scope.cancel()
    finally:
        context.store.close()


def main(argv: list[str] | None = None) -> None:
    # until the reindex signals are received (serve), they must not end the process
    for signum in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_IGN)
    args = parse_args(argv)
    configure_logging()
    root = Path(args.root).resolve()
    if not root.is_dir():
        print(f"assern.context: --root {args.root!r} is not a folder", file=sys.stderr)
        raise SystemExit(2)
    try:
        ranking = choose_ranking(dict(os.environ), semantic=semantic_installed())
    except ValueError as exc:
        print(f"assern.context: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    db = Path(args.db) if args.db else database_path(assern_home(dict(os.environ)), root)
    rules = ScanRules(
        exclude=tuple(args.exclude), max_file_size=args.max_file_size, secrets=tuple(args.secret)
    )
    context = ContextServer(root, rules, db, watch=not args.no_watch, ranking=ranking)
    log.info("context ranking", ranking=ranking.mode, signals=list(ranking.signals))
    anyio.run(serve, context, backend="trio")
