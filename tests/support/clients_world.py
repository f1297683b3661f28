"""A temporary HOME holding a config file of every client, written in each one's format.

The files follow what each client documents and writes (docs/clients.md names the
versions): Claude Code's `~/.claude.json` with user and local scopes and a project's
`.mcp.json`; Claude Desktop's; Cursor's, user and project; VS Code's JSONC with comments
and trailing commas; Windsurf's; Codex's TOML with comments; Gemini CLI's settings.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

#: A literal secret written into client files; no output may show it.
LITERAL_TOKEN = "ghp_literalsecret0123456789abcdefABCDEF"


class ClientWorld:
    """HOME, ASSERN_HOME and a project folder (a git work tree) under tmp_path."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.assern_home = self.home / ".valksor" / "assern"
        self.project = self.home / "work" / "app"
        (self.project / ".git").mkdir(parents=True)
        self.environ = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def write(self, path: Path | str, text: str) -> Path:
        target = self.home / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return target

    # Each client's files, as the client writes them.

    def claude_code(self) -> tuple[Path, Path]:
        user = self.write(
            ".claude.json",
            f"""
            {{
              "numStartups": 3,
              "mcpServers": {{
                "github": {{
                  "type": "stdio",
                  "command": "npx",
                  "args": [
                    "-y",
                    "@modelcontextprotocol/server-github"
                  ],
                  "env": {{
                    "GITHUB_TOKEN": "{LITERAL_TOKEN}"
                  }}
                }},
                "docs": {{
                  "type": "http",
                  "url": "https://docs.example.com/mcp",
                  "headers": {{
                    "Authorization": "Bearer ${{DOCS_TOKEN}}"
                  }}
                }}
              }},
              "projects": {{
                "{self.project}": {{
                  "allowedTools": [],
                  "mcpServers": {{
                    "scratch": {{
                      "type": "stdio",
                      "command": "node",
                      "args": [
                        "scratch.js"
                      ],
                      "env": {{}}
                    }}
                  }},
                  "disabledMcpServers": [
                    "scratch"
                  ],
                  "hasTrustDialogAccepted": false
                }}
              }}
            }}
            """,
        )
        project = self.write(
            self.project / ".mcp.json",
            """
            {
              "mcpServers": {
                "notes": {
                  "type": "stdio",
                  "command": "uvx",
                  "args": [
                    "notes-server",
                    "--root",
                    "${NOTES_ROOT:-/srv/notes}"
                  ],
                  "env": {
                    "NOTES_KEY": "${NOTES_KEY}"
                  }
                }
              }
            }
            """,
        )
        return user, project

    def claude_desktop(self, *, macos: bool = False) -> Path:
        folder = "Library/Application Support/Claude" if macos else ".config/Claude"
        return self.write(
            f"{folder}/claude_desktop_config.json",
            """
            {
              "mcpServers": {
                "filesystem": {
                  "command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Documents"]
                },
                "price": {
                  "command": "price-server",
                  "args": ["--currency", "$USD"]
                }
              },
              "globalShortcut": "Ctrl+Space"
            }
            """,
        )

    def cursor(self) -> tuple[Path, Path]:
        user = self.write(
            ".cursor/mcp.json",
            """
            {
              "mcpServers": {
                "github": {
                  "command": "github-mcp-server",
                  "args": ["stdio"],
                  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${env:WORK_GITHUB_TOKEN}"}
                },
                "linear": {
                  "url": "https://mcp.linear.app/sse"
                }
              }
            }
            """,
        )
        project = self.write(
            self.project / ".cursor/mcp.json",
            """
            {
              "mcpServers": {
                "db": {
                  "command": "db-mcp",
                  "args": ["--root", "${workspaceFolder}/data"]
                }
              }
            }
            """,
        )
        return user, project

    def vscode(self) -> tuple[Path, Path]:
        user = self.write(
            ".config/Code/User/mcp.json",
            """
            // VS Code's MCP servers
            {
              "inputs": [
                {"type": "promptString", "id": "perplexity-key", "password": true},
              ],
              "servers": {
                /* search the web */
                "perplexity": {
                  "type": "stdio",
                  "command": "npx",
                  "args": ["-y", "server-perplexity-ask"],
                  "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"},
                },
                "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]}, // fetch pages
              },
            }
            """,
        )
        project = self.write(
            self.project / ".vscode/mcp.json",
            """
            {
              // this project's servers
              "servers": {
                "playwright": {"command": "npx", "args": ["@playwright/mcp@latest"]}
              }
            }
            """,
        )
        return user, project

    def windsurf(self) -> Path:
        return self.write(
            ".codeium/windsurf/mcp_config.json",
            """
            {
              "mcpServers": {
                "sentry": {
                  "serverUrl": "https://mcp.sentry.dev/mcp",
                  "headers": {"Authorization": "Bearer sntrys_literal_token_value_42"}
                },
                "old": {
                  "command": "old-server",
                  "disabled": true,
                  "disabledTools": ["drop_all"]
                }
              }
            }
            """,
        )

    def codex(self) -> Path:
        return self.write(
            ".codex/config.toml",
            """
            model = "o3"  # the model

            # GitHub, through npx
            [mcp_servers.github]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-github"]
            env_vars = ["GITHUB_TOKEN"]

            [mcp_servers.search]
            command = "search-server"
            enabled = false
            tool_timeout_sec = 30

            [mcp_servers.search.env]
            SEARCH_API_KEY = "sk_live_literal000000000000000000"

            [mcp_servers.remote]
            url = "https://remote.example.com/mcp"
            bearer_token_env_var = "REMOTE_TOKEN"

            [projects."/somewhere"]
            trust_level = "trusted"
            """,
        )

    def gemini(self) -> tuple[Path, Path]:
        user = self.write(
            ".gemini/settings.json",
            """
            {
              "theme": "Default",
              "mcpServers": {
                "github": {
                  "command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-github"],
                  "env": {"GITHUB_TOKEN": "$GITHUB_TOKEN"},
                  "timeout": 30000,
                  "trust": false
                },
                "stream": {"httpUrl": "https://stream.example.com/mcp"}
              },
              "mcp": {"excluded": ["stream"]}
            }
            """,
        )
        project = self.write(
            self.project / ".gemini/settings.json",
            """
            {
              "mcpServers": {
                "legacy": {"url": "http://127.0.0.1:8931/sse"}
              }
            }
            """,
        )
        return user, project

    def every_client(self) -> dict[str, list[Path]]:
        return {
            "claude-code": list(self.claude_code()),
            "claude-desktop": [self.claude_desktop()],
            "cursor": list(self.cursor()),
            "vscode": list(self.vscode()),
            "windsurf": [self.windsurf()],
            "codex": [self.codex()],
            "gemini": list(self.gemini()),
        }
