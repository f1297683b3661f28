"""A stand-in for the context engine with its tools' shapes, for the context benchmark's
own tests (tests/ops/test_context_bench.py): the bench drives it exactly as it drives
`python -I -m assern.context`, so its MCP path is tested before the engine exists.

    python tests/servers/context_double_server.py --root ROOT

It indexes ROOT's text files lazily, a few per call, so `index.pending` falls over the
first calls as a real first index does; every call first re-reads files whose size or
mtime changed and drops deleted ones, so a saved file is found by the next search. Its
ranking is a count of the query's words in each file: not a ranking to measure, only
one the bench can read. It writes its state to $ASSERN_HOME/cache/context/double.json,
where the test reads which ranking mode it was given (ASSERN_CONTEXT_RANKING, refused
when not lexical, reranked or fused) and which re-ranking signal was switched off
(ASSERN_CONTEXT_RERANK_DISABLE), and where the bench measures a database size.

Tools: `semantic_search {query, top_k?, path?}` → {"results": [{"path", "start_line",
"end_line", "score", "text"}], "index": {"files", "pending"}} and
`get_context_for_prompt {query, max_files?, max_tokens?}` → {"summary", "files":
[{"path", "snippets": [{"text", "lines"}]}], "hints", "tokens"}.
"""

from __future__ import annotations

import gc

gc.disable()  # as in notes_server.py: the SDK's import is cheaper without collector passes

import argparse
import fnmatch
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server

gc.enable()
gc.freeze()

Ctx = ServerRequestContext[Any, Any]
MODES = ("lexical", "reranked", "fused")
BATCH = 25  # files indexed per call while the first index is pending
WORD = re.compile(r"\w+")


class Index:
    def __init__(self, root: Path, state: Path, mode: str | None) -> None:
        self.root = root
        self.state = state
        self.mode = mode
        self.texts: dict[str, str] = {}
        self.stamps: dict[str, tuple[int, int]] = {}
        self.pending: list[str] = []

    def scan(self) -> None:
        """Queue new and changed files, drop deleted ones."""
        seen = set()
        for path in sorted(self.root.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            name = path.relative_to(self.root).as_posix()
            seen.add(name)
            stat = path.stat()
            stamp = (stat.st_size, stat.st_mtime_ns)
            if self.stamps.get(name) != stamp and name not in self.pending:
                self.pending.append(name)
        for name in set(self.texts) - seen:
            del self.texts[name]
            del self.stamps[name]
        self.pending = [name for name in self.pending if name in seen]

    def step(self, limit: int) -> None:
        for name in self.pending[:limit]:
            path = self.root / name
            stat = path.stat()
            data = path.read_bytes()
            self.stamps[name] = (stat.st_size, stat.st_mtime_ns)
            if b"\0" not in data[:8192]:
                self.texts[name] = data.decode("utf-8", errors="replace")
        del self.pending[:limit]
        disabled = os.environ.get("ASSERN_CONTEXT_RERANK_DISABLE")
        self.state.write_text(
            json.dumps({"ranking": self.mode, "disabled": disabled, "files": sorted(self.texts)})
        )

    def refresh(self) -> None:
        self.scan()
        # once the first index is done, every change is indexed at once
        self.step(BATCH if len(self.pending) > BATCH and len(self.texts) < BATCH * 4 else len(self.pending))

    def rank(self, query: str, glob: str | None) -> list[tuple[str, int]]:
        words = [w for w in WORD.findall(query.lower()) if len(w) > 2]
        scores = []
        for name, text in self.texts.items():
            if glob and not fnmatch.fnmatch(name, glob):
                continue
            low = text.lower()
            score = sum(low.count(w) for w in words)
            if score:
                scores.append((name, score))
        return sorted(scores, key=lambda item: (-item[1], item[0]))

    def counts(self) -> dict[str, int]:
        return {"files": len(self.texts), "pending": len(self.pending)}


def search(index: Index, arguments: dict[str, Any]) -> dict[str, Any]:
    top_k = int(arguments.get("top_k", 10))
    results = []
    for name, score in index.rank(str(arguments["query"]), arguments.get("path"))[:top_k]:
        lines = index.texts[name].splitlines()
        results.append(
            {"path": name, "start_line": 1, "end_line": max(1, len(lines)), "score": float(score),
             "text": "\n".join(lines[:10])}
        )  # fmt: skip
    return {"results": results, "index": index.counts()}


def bundle(index: Index, arguments: dict[str, Any]) -> dict[str, Any]:
    max_files = int(arguments.get("max_files", 5))
    budget = int(arguments.get("max_tokens", 4000))
    files: list[dict[str, Any]] = []
    tokens = 0
    for name, _ in index.rank(str(arguments["query"]), None)[:max_files]:
        text = "\n".join(index.texts[name].splitlines()[:20])
        cost = len(text) // 4 + 1
        if tokens + cost > budget:
            break
        tokens += cost
        files.append({"path": name, "snippets": [{"text": text, "lines": "1-20"}]})
    summary = "files: " + ", ".join(str(f["path"]) for f in files)
    return {"summary": summary, "files": files, "hints": [], "tokens": tokens}


def tools() -> list[types.Tool]:
    text = {"type": "string"}
    number = {"type": "integer"}
    return [
        types.Tool(
            name="semantic_search",
            description="Search the code under the root.",
            input_schema={
                "type": "object",
                "properties": {"query": text, "top_k": number, "path": text},
                "required": ["query"],
            },
        ),
        types.Tool(
            name="get_context_for_prompt",
            description="The best snippets for a prompt, grouped by file.",
            input_schema={
                "type": "object",
                "properties": {"query": text, "max_files": number, "max_tokens": number},
                "required": ["query"],
            },
        ),
    ]


async def serve(root: Path) -> None:
    mode = os.environ.get("ASSERN_CONTEXT_RANKING") or None
    if mode is not None and mode not in MODES:
        sys.exit(f"ASSERN_CONTEXT_RANKING={mode!r}: expected one of {', '.join(MODES)}")
    state = Path(os.environ["ASSERN_HOME"]) / "cache" / "context" / "double.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    index = Index(root, state, mode)
    listed = tools()

    async def list_tools(ctx: Ctx, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        index.refresh()
        found = search(index, arguments) if params.name == "semantic_search" else bundle(index, arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(found))], structured_content=found
        )

    server: Server[Any] = Server("context-double", on_list_tools=list_tools, on_call_tool=call_tool)
    options = server.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, required=True)
    anyio.run(serve, parser.parse_args().root.resolve(), backend="trio")


if __name__ == "__main__":
    main()
