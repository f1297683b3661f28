"""The commented starter config that `assernctl config init` writes."""

from __future__ import annotations

STARTER_CONFIG = """\
# assern: the MCP servers it starts and serves behind one endpoint.
#
# Check this file with `assernctl config validate`; see what assern makes of it
# (project, servers, where each env value comes from) with `assernctl config show`
# and `assernctl config explain SERVER`. assern reloads it when you save it.
#
# Values may use ${VAR}, $VAR and ${VAR:-default}. Variables come from the environment
# and from the .env file beside this one (KEY=VALUE lines): the place for tokens.
#
# Layers, low to high: the environment, this folder's .env, this file, the matching
# [projects.NAME], a project's .assern/.env, a project's .assern/config.toml.

# Servers of an existing mcpServers JSON file (Claude Desktop, Cursor, cllm-mcp):
# include = ["~/.cursor/mcp.json"]

[settings]
naming = "prefix"        # "prefix": {server}_{tool} always; "hybrid": natural name when unique
max_name_length = 64     # longer names are shortened deterministically (head + hash)

# The current time in any timezone: a server that comes with assern.
[servers.time]
command = "${ASSERN_PYTHON}"     # the Python assern runs on
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]

# A server started with npx; GITHUB_TOKEN comes from the environment or the .env file.
# [servers.github]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-github"]
# env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
# allowed = ["search_repositories", "get_*"]   # only these tools are listed AND callable
# restart = "permanent"    # permanent | transient | temporary
# max_restarts = 5         # ... within restart_window seconds, then the server is `failed`
# restart_window = 60
# timeout = 60             # seconds per call; a progress notification resets it
# disabled = false

# A remote server over streamable HTTP.
# [servers.docs]
# url = "http://127.0.0.1:9000/mcp"
# headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

# A project: applies in the folders that match (~/work/x exactly, ~/work/* one level
# below, ~/work/** any depth), or where a .assern/config.toml says project = "work".
# [projects.work]
# directories = ["~/work/**"]
# env = { GITHUB_TOKEN = "${WORK_TOKEN}" }    # merged into every server's env
# servers = ["github", "time"]                 # only these global servers here
"""
