"""`clients.reach`: each MCP client found here reaches assern, or what it does instead.

The facts are `assernctl clients`'s own survey (app/ctl/clients/survey.py): for each
client, each server entry runs assern, duplicates one of assern's backends (the client
starts that server itself: two processes of one server), or bypasses assern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assern.app.ctl.doctor.finding import Finding, ok, warn

if TYPE_CHECKING:
    from assern.app.ctl.doctor.facts import Facts

CLIENTS = "clients.reach"


def clients_reach(facts: Facts) -> list[Finding]:
    """One finding per client found: ok when it reaches assern and starts none of assern's
    servers itself; warn when it duplicates assern's backends, or bypasses assern."""
    survey = facts.clients
    if survey is None:
        return []
    if not survey.clients:
        return [ok(CLIENTS, "no MCP client configuration found for this user and folder")]
    found = []
    for client in survey.clients:
        duplicates = [f"{s.server.name} (= {s.backend})" for s in client.servers if s.reach == "duplicate"]
        bypass = [s.server.name for s in client.servers if s.reach == "bypass"]
        if duplicates:
            summary = f"{client.client} starts assern's servers itself too: {', '.join(duplicates)}"
            found.append(warn(CLIENTS, summary, f"assernctl clients wire {client.client}"))
        elif not client.wired and client.servers:
            summary = f"{client.client} does not reach assern; its servers: {', '.join(bypass)}"
            fix = f"assernctl clients import {client.client} && assernctl clients wire {client.client}"
            found.append(warn(CLIENTS, summary, fix))
        elif not client.wired:
            summary = f"{client.client} has no MCP server and does not reach assern"
            found.append(warn(CLIENTS, summary, f"assernctl clients wire {client.client}"))
        else:
            beside = f"; beside it: {', '.join(bypass)}" if bypass else ""
            found.append(ok(CLIENTS, f"{client.client} reaches assern{beside}"))
    return found
