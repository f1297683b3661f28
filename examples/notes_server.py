"""A small notes server: a demo MCP server to play with through assern.

It keeps a handful of notes in memory (they are gone when it stops) and offers
all three kinds of MCP features:

- tools      add_note(title, body), list_notes(), search_notes(query)
- resources  note://1, note://2, … (one listed resource per note) and the
             resource template note://{id} for reading any note by id
- prompts    summarize-notes(style, [max_words])

Run it on its own (it speaks MCP over stdin/stdout, so it waits for a client):

    python -m assern.examples.notes_server

or let assern start it: it is one of the servers in the default configuration
(`examples/default.toml`), where its tools appear as `notes_add_note` and so on.

Built with the official SDK's high-level `MCPServer`: each decorated function
becomes a tool, resource or prompt, and its type hints become the JSON schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import TextResource
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

mcp = MCPServer(
    "notes",
    version="1.0.0",
    instructions=(
        "A scratch pad of short notes. Use list_notes or search_notes to find notes, "
        "add_note to save one, and read note://{id} for a note's full text."
    ),
)


@dataclass(frozen=True)
class Note:
    id: str
    title: str
    body: str

    @property
    def uri(self) -> str:
        return f"note://{self.id}"

    def as_markdown(self) -> str:
        return f"# {self.title}\n\n{self.body}\n"

    def one_line(self) -> str:
        return f"[{self.id}] {self.title}: {self.body}"


NOTES: dict[str, Note] = {}


def store(title: str, body: str) -> Note:
    """Save a new note and publish it as a listed resource."""
    note = Note(id=str(len(NOTES) + 1), title=title, body=body)
    NOTES[note.id] = note
    mcp.add_resource(
        TextResource(
            uri=note.uri,
            name=f"note-{note.id}",
            title=note.title,
            description=f"The note “{note.title}”.",
            mime_type="text/markdown",
            text=note.as_markdown(),
        )
    )
    return note


# A few notes to start with, so there is something to list and search.
store(
    "Welcome to assern",
    "assern puts many MCP servers behind one. Each tool carries its server's name as a prefix, "
    "so this server's tools appear as notes_add_note, notes_list_notes and notes_search_notes.",
)
store("Groceries", "Coffee beans, oat milk, rye bread, two lemons.")
store("Ideas", "Try the summarize-notes prompt with style=haiku, then add a note of your own.")


# --- tools ----------------------------------------------------------------------


@mcp.tool(
    description=(
        "Save a new note.\n\n"
        "Returns the new note's id and its resource URI (note://ID), "
        "which any client can read afterwards."
    ),
    structured_output=False,
)
async def add_note(
    title: Annotated[str, Field(description="A short title, e.g. 'Groceries'.")],
    body: Annotated[str, Field(description="The text of the note.")],
    ctx: Context,
) -> str:
    note = store(title, body)
    # The list of resources grew: tell the client so it can list them again.
    # 2026-07-28 clients hear it on their subscriptions/listen stream; clients
    # of the 2025 handshake protocol get the classic notification.
    await ctx.notify_resources_changed()
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        await ctx.session.send_resource_list_changed()
    return f"Added note {note.id}: {note.title} ({note.uri})"


@mcp.tool(description="List every note, one line each: [id] title: text.", structured_output=False)
def list_notes() -> str:
    if not NOTES:
        return "There are no notes yet."
    return "\n".join(note.one_line() for note in NOTES.values())


@mcp.tool(
    description=(
        "Find notes that mention a word or phrase.\n\n"
        "Matches titles and texts, ignoring case. Returns one line per match."
    ),
    structured_output=False,
)
def search_notes(query: Annotated[str, Field(description="The text to look for.")]) -> str:
    needle = query.casefold()
    hits = [note for note in NOTES.values() if needle in f"{note.title}\n{note.body}".casefold()]
    if not hits:
        return f"No note mentions {query!r}."
    return "\n".join(note.one_line() for note in hits)


# --- resources ------------------------------------------------------------------
# Each note is also a listed resource (see `store`); this template reads any
# note by id, including ones a client has not seen in a listing yet.


@mcp.resource(
    "note://{id}",
    name="note",
    title="A note by id",
    description="One note as Markdown: its title as a heading, then its text.",
    mime_type="text/markdown",
)
def read_note(id: str) -> str:  # noqa: A002 - the template's variable is {id}
    note = NOTES.get(id)
    if note is None:
        raise ResourceNotFoundError(f"There is no note with id {id!r}.")
    return note.as_markdown()


# --- prompts --------------------------------------------------------------------


@mcp.prompt(
    name="summarize-notes",
    title="Summarize my notes",
    description="Ask the model for a summary of all notes, in a style of your choice.",
)
def summarize_notes(
    style: Annotated[str, Field(description="How to write it, e.g. 'bullet points', 'haiku', 'formal'.")],
    max_words: Annotated[int | None, Field(description="An upper bound on the summary's length.")] = None,
) -> str:
    limit = f" Use at most {max_words} words." if max_words is not None else ""
    notes = "\n".join(note.as_markdown() for note in NOTES.values())
    return f"Summarize the following notes as {style}.{limit}\n\n{notes}"


def main() -> None:
    anyio.run(mcp.run_stdio_async, backend="trio")


if __name__ == "__main__":
    main()
