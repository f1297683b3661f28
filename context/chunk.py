"""Files into chunks: definitions by tree-sitter, Markdown by headings, other text by lines.

A source file of a known language (`LANGUAGES`) is parsed with its tree-sitter grammar,
which comes from the grammar's own wheel on PyPI (nothing is downloaded at run time).
Each definition becomes a chunk named by its qualified symbol (`Class.method`,
`Type.method` for a Go receiver or a Rust `impl`, `ns.Class.method` in C++); a container
(a class, an `impl`, a module) gets a chunk of its head (what comes before its first
member definition), and its members their own. Whatever no definition covers (imports,
module-level code, a class's fields between methods) is cut into line windows, so every
line of a file is in some chunk. A definition longer than `MAX_LINES` is cut into windows
that keep its symbol.

Markdown is cut at its headings (the symbol is the heading's path, `Install > Linux`);
any other text into windows of `WINDOW` lines overlapping by `OVERLAP`.

When a grammar cannot be loaded, its files fall back to line windows
(`grammar_problems` says which and why).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import re
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator

    import tree_sitter

#: Lines per window, and lines two neighbouring windows share.
WINDOW = 50
OVERLAP = 10
#: A definition longer than this is cut into windows (each keeps its symbol).
MAX_LINES = 150
#: Syntax-tree depth below which no definition is looked for (deeply nested
#: expressions of generated code would otherwise exhaust the stack).
MAX_DEPTH = 80


@attrs.frozen(kw_only=True)
class Chunk:
    """A piece of one file, 1-based inclusive lines, with the symbol it defines if any."""

    start_line: int
    end_line: int
    kind: str
    text: str
    symbol: str | None = None


@attrs.frozen(kw_only=True)
class Language:
    """How to load one tree-sitter grammar and read its definitions.

    Attributes:
        module: The grammar wheel's module (`tree_sitter_python`).
        function: Its function returning the language pointer.
        functions: Node types of function-like definitions (not entered further).
        containers: Node types of definitions whose members are definitions too.
    """

    module: str
    function: str
    functions: frozenset[str]
    containers: frozenset[str]


def _lang(module: str, functions: str, containers: str, function: str = "language") -> Language:
    return Language(
        module=module,
        function=function,
        functions=frozenset(functions.split()),
        containers=frozenset(containers.split()),
    )


_JS_FUNCTIONS = "function_declaration generator_function_declaration method_definition variable_declarator"
_TS_FUNCTIONS = f"{_JS_FUNCTIONS} interface_declaration type_alias_declaration enum_declaration"
_TS_CONTAINERS = "class_declaration abstract_class_declaration internal_module"

#: The languages chunked by definitions, by name.
LANGUAGES: dict[str, Language] = {
    "python": _lang("tree_sitter_python", "function_definition", "class_definition"),
    "javascript": _lang("tree_sitter_javascript", _JS_FUNCTIONS, "class_declaration"),
    "typescript": _lang("tree_sitter_typescript", _TS_FUNCTIONS, _TS_CONTAINERS, "language_typescript"),
    "tsx": _lang("tree_sitter_typescript", _TS_FUNCTIONS, _TS_CONTAINERS, "language_tsx"),
    "go": _lang("tree_sitter_go", "function_declaration method_declaration type_spec", ""),
    "rust": _lang(
        "tree_sitter_rust",
        "function_item struct_item enum_item union_item type_item macro_definition const_item static_item",
        "impl_item trait_item mod_item",
    ),
    "java": _lang(
        "tree_sitter_java",
        "method_declaration constructor_declaration",
        "class_declaration interface_declaration enum_declaration record_declaration "
        "annotation_type_declaration",
    ),
    "c": _lang("tree_sitter_c", "function_definition struct_specifier enum_specifier union_specifier", ""),
    "cpp": _lang(
        "tree_sitter_cpp",
        "function_definition enum_specifier union_specifier",
        "class_specifier struct_specifier namespace_definition",
    ),
    "ruby": _lang("tree_sitter_ruby", "method singleton_method", "class module"),
    "bash": _lang("tree_sitter_bash", "function_definition", ""),
}

#: File suffixes (lower case) and whole names by language; "markdown" is cut by headings.
SUFFIXES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".rb": "ruby",
    ".rake": "ruby",
    ".sh": "bash",
    ".bash": "bash",
    ".md": "markdown",
    ".markdown": "markdown",
}
NAMES = {"Rakefile": "ruby", "Gemfile": "ruby", ".bashrc": "bash", ".profile": "bash"}


def language_of(path: str) -> str | None:
    """The language of a file by its name, or None for plain text."""
    name = path.rsplit("/", 1)[-1]
    if name in NAMES:
        return NAMES[name]
    dot = name.rfind(".")
    return SUFFIXES.get(name[dot:].lower()) if dot > 0 else None


#: Grammars that failed to load, with the reason (their files fall back to windows).
_problems: dict[str, str] = {}


@functools.cache
def parser(language: str) -> tree_sitter.Parser | None:
    """A parser for `language` (cached), or None when its grammar cannot be loaded."""
    spec = LANGUAGES.get(language)
    if spec is None:
        return None
    try:
        import tree_sitter

        module = importlib.import_module(spec.module)
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, spec.function)()))
    except (ImportError, AttributeError, ValueError) as exc:
        _problems[language] = f"{type(exc).__name__}: {exc}"
        return None


def grammar_problems() -> dict[str, str]:
    """Each language whose grammar failed to load so far, and why."""
    return dict(_problems)


# -- windows ------------------------------------------------------------------------------


def windows(
    lines: list[str], first: int, last: int, *, kind: str = "text", symbol: str | None = None
) -> Iterator[Chunk]:
    """Lines `first..last` (1-based, inclusive) in windows of `WINDOW` sharing `OVERLAP`.

    Blank lines at either end are trimmed; an all-blank range gives nothing.
    """
    while first <= last and not lines[first - 1].strip():
        first += 1
    while last >= first and not lines[last - 1].strip():
        last -= 1
    start = first
    while start <= last:
        end = min(start + WINDOW - 1, last)
        if last - end < OVERLAP:  # no window made only of the previous one's tail
            end = last
        yield Chunk(
            start_line=start,
            end_line=end,
            kind=kind,
            symbol=symbol,
            text="\n".join(lines[start - 1 : end]),
        )
        if end == last:
            return
        start = end - OVERLAP + 1


# -- definitions --------------------------------------------------------------------------


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _declarator_name(node: tree_sitter.Node) -> str:
    """The name a C/C++ declarator declares (`ns::Type::method` → `ns.Type.method`)."""
    while (inner := node.child_by_field_name("declarator")) is not None:
        node = inner
    return _text(node).replace("::", ".")


def _go_receiver(node: tree_sitter.Node) -> str:
    receiver = node.child_by_field_name("receiver")
    found = re.search(r"\*?\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*\)$", _text(receiver))
    return found.group(1) if found else ""


_TYPE_SPECIFIERS = frozenset({"struct_specifier", "enum_specifier", "union_specifier", "class_specifier"})
_ANONYMOUS_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function", "class"}
)


def _name(node: tree_sitter.Node) -> str | None:
    """The name a definition node defines, or None when it defines nothing we name."""
    kind = node.type
    if kind == "variable_declarator":  # const f = () => ...
        value = node.child_by_field_name("value")
        return _text(node.child_by_field_name("name")) if value and value.type in _ANONYMOUS_VALUES else None
    if kind == "function_definition" and node.child_by_field_name("declarator") is not None:
        return _declarator_name(node)  # C and C++
    if kind == "impl_item":  # `impl<T> Trait for Type<T>`: the type, without its parameters
        found = re.match(r"[\w:]+", _text(node.child_by_field_name("type")))
        return found.group().replace("::", ".") if found else None
    if kind in _TYPE_SPECIFIERS and node.child_by_field_name("body") is None:
        return None  # a use of the type, not its definition
    if kind == "method_declaration" and node.child_by_field_name("receiver") is not None:
        receiver = _go_receiver(node)
        method = _text(node.child_by_field_name("name"))
        return f"{receiver}.{method}" if receiver else method
    if kind == "singleton_method":
        return _text(node.child_by_field_name("name")) or None
    if kind == "namespace_definition":
        return _text(node.child_by_field_name("name")) or None
    return _text(node.child_by_field_name("name")).replace("::", ".") or None


@attrs.frozen
class _Definition:
    start: int  # 1-based lines
    end: int
    symbol: str
    kind: str
    members_start: int | None  # the first member's line, for a container with members


def _definitions(root: tree_sitter.Node, spec: Language) -> list[_Definition]:
    found: list[_Definition] = []

    def visit(node: tree_sitter.Node, scope: tuple[str, ...], depth: int = 0) -> int | None:
        """Collect the definitions below `node`; the first one's start line, if any."""
        if depth > MAX_DEPTH:
            return None  # deep expressions (generated code) hold no definitions we name
        first: int | None = None
        for child in node.named_children:
            kind = child.type
            start: int | None
            if kind in spec.functions or kind in spec.containers:
                name = _name(child)
                start = visit(child, scope, depth + 1) if name is None else _add(child, name, scope)
            else:
                start = visit(child, scope, depth + 1)
            if start is not None and first is None:
                first = start
        return first

    def _add(node: tree_sitter.Node, name: str, scope: tuple[str, ...]) -> int:
        outer = node.parent
        # decorators (Python), `export`/`const` (JavaScript) belong to the definition
        head = node
        while outer is not None and outer.type in _WRAPPERS:
            head, outer = outer, outer.parent
        start = head.start_point[0] + 1
        end = node.end_point[0] + 1
        symbol = ".".join((*scope, name))
        if node.type in spec.containers:
            members = visit(node, (*scope, name))
            found.append(_Definition(start, end, symbol, "container", members))
        else:
            found.append(_Definition(start, end, symbol, "method" if scope else "function", None))
        return start

    visit(root, ())
    return found


#: Nodes that wrap a definition and belong to its chunk.
_WRAPPERS = frozenset(
    {"decorated_definition", "export_statement", "lexical_declaration", "variable_declaration"}
)


def _code_chunks(lines: list[str], definitions: list[_Definition]) -> Iterator[Chunk]:
    covered = [False] * (len(lines) + 2)
    chunks: list[Chunk] = []
    for definition in definitions:
        end = definition.end
        kind = definition.kind
        if definition.members_start is not None:
            end = max(definition.start, definition.members_start - 1)
        if kind == "container":
            kind = "class"
        if end - definition.start + 1 > MAX_LINES:
            chunks += windows(lines, definition.start, end, kind=kind, symbol=definition.symbol)
        else:
            text = "\n".join(lines[definition.start - 1 : end])
            chunks.append(
                Chunk(
                    start_line=definition.start, end_line=end, kind=kind, symbol=definition.symbol, text=text
                )
            )
        for line in range(definition.start, end + 1):
            covered[line] = True
    # what no definition covers: module-level code, fields between methods
    containers = [d for d in definitions if d.members_start is not None]
    line = 1
    while line <= len(lines):
        if covered[line]:
            line += 1
            continue
        first = line
        while line <= len(lines) and not covered[line]:
            line += 1
        inside = [d for d in containers if d.start <= first <= d.end]
        symbol = max(inside, key=lambda d: d.start).symbol if inside else None
        chunks += windows(lines, first, line - 1, kind="code", symbol=symbol)
    yield from sorted(chunks, key=lambda chunk: (chunk.start_line, chunk.end_line))


# -- Markdown -----------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _markdown_chunks(lines: list[str]) -> Iterator[Chunk]:
    sections: list[tuple[int, str | None]] = [(1, None)]
    path: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        heading = None if fenced else _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, heading.group(2)))
            sections.append((number, " > ".join(title for _, title in path)))
    sections.append((len(lines) + 1, None))
    for (start, symbol), (next_start, _) in itertools.pairwise(sections):
        if next_start - start > MAX_LINES or symbol is None:
            yield from windows(lines, start, next_start - 1, kind="section", symbol=symbol)
        elif any(line.strip() for line in lines[start - 1 : next_start - 1]):
            last = next_start - 1
            while last > start and not lines[last - 1].strip():
                last -= 1
            text = "\n".join(lines[start - 1 : last])
            yield Chunk(start_line=start, end_line=last, kind="section", symbol=symbol, text=text)


# -- entry point --------------------------------------------------------------------------


def chunk_file(path: str, text: str) -> list[Chunk]:
    """Cut one file's text into chunks by its language (module docstring).

    Args:
        path: The file's path (its name picks the language).
        text: Its whole text.

    Returns:
        The chunks in line order; every non-blank line is in at least one.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    language = language_of(path)
    if language == "markdown":
        return list(_markdown_chunks(lines))
    ts_parser = parser(language) if language else None
    if ts_parser is None:
        return list(windows(lines, 1, len(lines)))
    tree = ts_parser.parse(text.encode("utf-8", "replace"))
    return list(_code_chunks(lines, _definitions(tree.root_node, LANGUAGES[language or ""])))
