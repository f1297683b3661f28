"""Sphinx configuration of assern's documentation site (`docs/`).

The pages are Markdown, read by MyST, so each reads the same on a code host as in the
built site. CI builds the site strictly (`sphinx-build -W --keep-going -n`): a warning,
a broken cross-reference or a missing heading anchor fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sphinx.application import Sphinx

project = "assern"
author = "assern contributors"
copyright = "assern contributors"  # noqa: A001 (Sphinx's own setting name)
# The version is the package's, read from its one source (pyproject.toml's hatch.version).
_identity = Path(__file__).resolve().parent.parent / "actors" / "identity.py"
_found = re.search(r'^__version__ = "([^"]+)"', _identity.read_text(encoding="utf-8"), re.MULTILINE)
release = _found.group(1) if _found else "unknown"
version = release

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# GitHub-style anchors for headings down to level 4, so `page.md#a-heading` links work
# both in the built site and on a code host.
myst_heading_anchors = 4

html_theme = "alabaster"
html_title = "assern"
html_theme_options = {
    "description": "One MCP server in front of many",
    "fixed_sidebar": True,
    # wide enough for the reference tables and the 90-column code blocks
    "page_width": "1180px",
}

# Nitpicky mode (-n) checks every reference; the pages make none to Python objects.
nitpicky = True


def setup(app: Sphinx) -> None:
    """Register the `jsonc` lexer of the pages' annotated JSON examples."""
    app.add_lexer("jsonc", _annotated_json_lexer())


def _annotated_json_lexer() -> type:
    """JSON with `//` comments, placeholders (`SERVER`, `…`) and arrows (`→`, `←`).

    The examples of `--json` output and of the control socket are JSON annotated for the
    reader, as a code host shows `jsonc` blocks. Pygments' JSON lexer reads the comments;
    what it cannot read is shown as plain text instead of failing the strict build.
    """
    from pygments.lexers import JsonLexer
    from pygments.token import Error, Text

    class AnnotatedJsonLexer(JsonLexer):
        name = "JSON with comments"

        def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, Any, str]]:
            for index, token, value in super().get_tokens_unprocessed(text):
                yield index, Text if token is Error else token, value

    return AnnotatedJsonLexer
