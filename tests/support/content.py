"""Reading text out of MCP content without caring which content type the model says it is."""

from __future__ import annotations


def text_in(content: object) -> str:
    """The `text` of a content item, resource contents or message content ("" when none)."""
    text = getattr(content, "text", "")
    return text if isinstance(text, str) else ""
