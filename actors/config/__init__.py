"""The configuration layer: layered .env, TOML and `mcpServers` JSON resolved into specs.

Import from the modules: `spec` (the resolved values and `ConfigError`), `resolve`
(`resolve_config`, `default_assern_home`), `env` (`expand_vars`, `parse_dotenv`,
`merge_env`), `project` (`detect_project`), `model` and `structure` (the file schema and
its strict cattrs converter). Nothing is re-exported here, so importing `spec` stays cheap.
"""
