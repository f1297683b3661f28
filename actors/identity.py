"""What assern calls itself, to its clients, to its backends and on its command line.

The one place the version is written: the build reads it from here too
(`[tool.hatch.version]` in pyproject.toml).
"""

__version__ = "0.1.0"

#: `serverInfo.name` towards clients, `clientInfo.name` towards backends.
NAME = "assern"
