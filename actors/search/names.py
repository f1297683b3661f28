"""The names of search exposure's meta-tools: all the call path needs of search, so an
instance that does not search never loads the index (meta_tools.py has their
definitions, exposure.py their handling)."""

from __future__ import annotations

SEARCH_TOOLS = "search_tools"
DESCRIBE_TOOLS = "describe_tools"
CALL_TOOL = "call_tool"
META_TOOLS = (SEARCH_TOOLS, DESCRIBE_TOOLS, CALL_TOOL)
