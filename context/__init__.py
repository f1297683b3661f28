"""The context server: a project's own code as context, served over MCP.

A separate process (`python -I -m assern.context --root ROOT`), started by the backends
supervisor for a `[servers.NAME] builtin = "context"` table like any stdio backend. It
walks the root (scan.py), cuts each file into language-aware chunks (chunk.py), keeps
them in one SQLite database per root (store.py), ranks them for a query (rank.py) and
serves three read-only tools (tools.py, server.py).
"""
