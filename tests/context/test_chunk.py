"""Every grammar loads from its wheel with no network, and each language yields its symbols."""

from __future__ import annotations

import socket

import pytest

from assern.context import chunk
from assern.context.chunk import Chunk, chunk_file, language_of, windows

# One small sample per language, the symbols its chunks must name.
SAMPLES = {
    "a.py": '''import os

class Retry:
    """A policy."""
    limit = 3

    @staticmethod
    def decide(self):
        return 1

    def backoff(self):
        def inner():
            pass
        return 2

def main():
    pass
''',
    "a.js": """import x from "y";
export function login(user) { return db(user); }
const logout = async () => { return 1; };
class Session {
  constructor() {}
  refresh() { return 2; }
}
""",
    "a.ts": """interface User { name: string }
type Id = string;
export class Auth {
  check(u: User): boolean { return true; }
}
function hash(s: string): string { return s; }
""",
    "a.tsx": """export function Button(props: {label: string}) { return <b>{props.label}</b>; }
""",
    "a.go": """package main

type Server struct { port int }

func (s *Server) Listen() error { return nil }

func main() {}
""",
    "a.rs": """struct Pool { size: usize }
impl<T> Clone for Pool { fn clone(&self) -> Self { Pool { size: 1 } } }
impl Pool {
    fn acquire(&self) -> usize { self.size }
}
fn main() {}
""",
    "A.java": """package x;
public class Cache {
    public Cache() {}
    public int get(String key) { return 1; }
}
""",
    "a.c": """#include <stdio.h>
struct node { int v; };
static int parse_header(const char *s) { return 0; }
int main(void) { return 0; }
""",
    "a.cpp": """namespace net {
class Socket {
 public:
  void open() {}
};
}
void net::Socket::close() {}
""",
    "a.rb": """module Billing
  class Invoice
    def total
      1
    end
    def self.build
    end
  end
end
""",
    "a.sh": """#!/bin/sh
deploy() {
  echo hi
}
function rollback {
  echo no
}
deploy
""",
}

EXPECTED = {
    "a.py": ["Retry", "Retry.decide", "Retry.backoff", "main"],
    "a.js": ["login", "logout", "Session", "Session.constructor", "Session.refresh"],
    "a.ts": ["User", "Id", "Auth", "Auth.check", "hash"],
    "a.tsx": ["Button"],
    "a.go": ["Server", "Server.Listen", "main"],
    "a.rs": ["Pool", "Pool.clone", "Pool.acquire", "main"],
    "A.java": ["Cache", "Cache.Cache", "Cache.get"],
    "a.c": ["node", "parse_header", "main"],
    "a.cpp": ["net", "net.Socket", "net.Socket.open", "net.Socket.close"],
    "a.rb": ["Billing", "Billing.Invoice", "Billing.Invoice.total", "Billing.Invoice.build"],
    "a.sh": ["deploy", "rollback"],
}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a socket fails the test: grammars come from their wheels."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a grammar tried to reach the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    chunk.parser.cache_clear()


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("path", sorted(SAMPLES))
def test_each_grammar_loads_offline_and_names_its_definitions(path: str) -> None:
    language = language_of(path)
    assert language is not None
    assert chunk.parser(language) is not None, chunk.grammar_problems()
    chunks = chunk_file(path, SAMPLES[path])
    named = list(dict.fromkeys(c.symbol for c in chunks if c.kind != "code" and c.symbol))
    assert named == EXPECTED[path]


def test_every_language_has_a_sample() -> None:
    assert {language_of(path) for path in SAMPLES} == set(chunk.LANGUAGES)


def test_definitions_carry_their_lines_and_text() -> None:
    chunks = {c.symbol: c for c in chunk_file("a.py", SAMPLES["a.py"]) if c.kind != "code"}
    decide = chunks["Retry.decide"]
    # the decorator belongs to the method
    assert (decide.start_line, decide.end_line) == (7, 9)
    assert decide.text.splitlines()[0].strip() == "@staticmethod"
    # a nested function stays inside its parent's chunk
    assert "inner" not in chunks
    assert "def inner" in chunks["Retry.backoff"].text
    # the class head holds its fields, up to its first method
    assert (chunks["Retry"].start_line, chunks["Retry"].end_line) == (3, 6)


def test_code_outside_definitions_is_kept_in_windows() -> None:
    chunks = chunk_file("a.sh", SAMPLES["a.sh"])
    loose = [(c.start_line, c.end_line) for c in chunks if c.kind == "code"]
    assert loose == [(1, 1), (8, 8)]


def test_a_long_definition_is_cut_into_windows_that_keep_its_symbol() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(400))
    chunks = chunk_file("long.py", f"def big():\n{body}\n")
    assert len(chunks) > 1
    assert {c.symbol for c in chunks} == {"big"}
    assert chunks[0].start_line == 1
    assert chunks[-1].end_line == 401


def test_markdown_is_cut_at_headings() -> None:
    text = "intro line\n\n# Install\n\npip it\n\n## Linux\n\napt\n```\n# not a heading\n```\n# Use\nrun\n"
    chunks = chunk_file("README.md", text)
    assert [(c.symbol, c.start_line, c.end_line) for c in chunks] == [
        (None, 1, 1),
        ("Install", 3, 5),
        ("Install > Linux", 7, 12),
        ("Use", 13, 14),
    ]


def test_other_text_is_cut_into_overlapping_windows() -> None:
    lines = [f"line {i}" for i in range(1, 121)]
    chunks = list(windows(lines, 1, 120))
    spans = [(c.start_line, c.end_line) for c in chunks]
    assert spans == [(1, 50), (41, 90), (81, 120)]
    assert chunks[1].text.splitlines()[0] == "line 41"
    assert chunk_file("notes.txt", "\n".join(lines)) == chunks


def test_blank_edges_are_trimmed_and_blank_files_give_nothing() -> None:
    assert list(windows(["", "a", "", ""], 1, 4)) == [Chunk(start_line=2, end_line=2, kind="text", text="a")]
    assert chunk_file("empty.txt", "\n\n\n") == []
    assert chunk_file("empty.py", "") == []


def test_a_missing_grammar_falls_back_to_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        chunk.LANGUAGES,
        "python",
        chunk.Language(
            module="no_such_grammar", function="language", functions=frozenset(), containers=frozenset()
        ),
    )
    chunk.parser.cache_clear()
    try:
        chunks = chunk_file("a.py", SAMPLES["a.py"])
        assert [c.kind for c in chunks] == ["text"]
        assert "no_such_grammar" in chunk.grammar_problems()["python"]
    finally:
        chunk.parser.cache_clear()
        chunk._problems.pop("python", None)


def test_language_by_name() -> None:
    assert language_of("src/x.PY") == "python"
    assert language_of("Rakefile") == "ruby"
    assert language_of("notes.txt") is None
    assert language_of(".gitignore") is None


def test_deeply_nested_code_does_not_exhaust_the_stack() -> None:
    deep = "x = " + "(" * 3000 + "1" + ")" * 3000
    chunks = chunk_file("generated.py", f"{deep}\n\ndef after():\n    pass\n")
    assert [c.symbol for c in chunks if c.kind == "function"] == ["after"]
