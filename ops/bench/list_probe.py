"""The aggregator's own time to answer tools/list, read by a bare client on raw pipes.

The figures of the main run go through the official client, whose process also parses
the previous answer (hundreds of pydantic models at K=20), samples the process tree and
runs its own event loop: its first byte carries that noise. Here a blocking client that
does nothing else writes one `tools/list` line, waits in `select` for the first byte and
reads the whole line without parsing it.

"Flat in K" is judged by holding the list fixed and varying K: the aggregator with K
backends of T tools against the same aggregator with one backend of K×T tools, in the
same run. An answer served from the catalog snapshot takes as long for both; one that
asked each backend would grow with K. (Across the scenarios the list itself grows with
K, and the time to copy a longer line into the pipe grows with it whoever serves it.)
Both aggregators run at once and are timed in alternating blocks of lists, once the
machine's CPUs are idle, so that both see the same noise: timed one after the other, the
first was timed while its K backends' start-up was still winding down.

Blocking: run it in a thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs
from measure import summary_ms
from procs import wait_quiet_blocking

#: how long the aggregator gets to list every backend's tools
VISIBLE_LIMIT = 60.0
#: how long one answer may take before the probe gives up
ANSWER_LIMIT = 10.0
#: lists per block: the aggregators are timed in alternating blocks of this many
BLOCK = 20
#: at most this long for the CPUs to be idle before the timed lists
QUIET_LIMIT = 5.0


class ProbeFailed(Exception):
    pass


class _Lines:
    """Newline-delimited JSON-RPC on a child's raw stdout, with a deadline per read."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.stdin = stdin
        self.fd = stdout.fileno()
        self.buffer = b""

    def send(self, message: Mapping[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def wait_readable(self, limit: float = ANSWER_LIMIT) -> None:
        if self.buffer:
            return
        ready, _, _ = select.select([self.fd], [], [], limit)
        if not ready:
            raise ProbeFailed(f"no answer within {limit:g} s")

    def line(self, limit: float = ANSWER_LIMIT) -> bytes:
        while b"\n" not in self.buffer:
            self.wait_readable(limit)
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise ProbeFailed("the aggregator closed its stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def answer(self, request_id: int, limit: float = ANSWER_LIMIT) -> dict[str, Any]:
        while True:
            message = json.loads(self.line(limit))
            if message.get("id") == request_id:
                return message


@contextlib.contextmanager
def _serving(argv: Sequence[str], env: Mapping[str, str], stderr: Path) -> Iterator[_Lines]:
    with stderr.open("ab") as errors:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=dict(env),
            start_new_session=True,
        )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield _Lines(process.stdin, process.stdout)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            process.wait()
        process.stdout.close()


def _until_listed(wire: _Lines, tools: int) -> None:
    """initialize, then list until `tools` tools are there (the backends have started)."""
    wire.send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "list-probe", "version": "1"},
            },
        }
    )
    wire.answer(0)
    wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    deadline = time.monotonic() + VISIBLE_LIMIT
    while True:
        wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        # The first list waits for the backends still starting: it gets their limit.
        listed = len(wire.answer(1, VISIBLE_LIMIT).get("result", {}).get("tools", []))
        if listed >= tools:
            return
        if time.monotonic() > deadline:
            raise ProbeFailed(f"only {listed} of {tools} tools listed after {VISIBLE_LIMIT:g} s")
        time.sleep(0.1)


class _Timings:
    def __init__(self) -> None:
        self.first: list[float] = []
        self.whole: list[float] = []
        self.size = 0
        self.next_id = 2

    def time_lists(self, wire: _Lines, count: int) -> None:
        for _ in range(count):
            request_id, self.next_id = self.next_id, self.next_id + 1
            request = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}).encode()
            started = time.perf_counter()
            wire.stdin.write(request + b"\n")
            wire.stdin.flush()
            wire.wait_readable()
            self.first.append(time.perf_counter() - started)
            self.size = len(wire.line())
            self.whole.append(time.perf_counter() - started)

    def summary(self) -> dict[str, Any]:
        return {
            "first_byte": summary_ms(self.first),
            "whole_line": summary_ms(self.whole),
            "bytes": self.size,
        }


@attrs.frozen
class Shape:
    """One aggregator to probe: how to start it, where its stderr goes."""

    argv: Sequence[str]
    env: Mapping[str, str]
    stderr: Path


def probe(
    shapes: Mapping[str, Shape], tools: int, lists: int, block: int = BLOCK, quiet: float = QUIET_LIMIT
) -> dict[str, Any]:
    """Start every shape's aggregator, wait until each lists `tools` tools and the CPUs are
    idle, then time `lists` lists of each, in alternating blocks of `block`."""
    with contextlib.ExitStack() as stack:
        wires = {key: stack.enter_context(_serving(s.argv, s.env, s.stderr)) for key, s in shapes.items()}
        for wire in wires.values():
            _until_listed(wire, tools)
        wait_quiet_blocking(quiet)
        timings = {key: _Timings() for key in wires}
        done = 0
        while done < lists:
            count = min(block, lists - done)
            for key, wire in wires.items():
                timings[key].time_lists(wire, count)
            done += count
        return {key: timing.summary() for key, timing in timings.items()}
