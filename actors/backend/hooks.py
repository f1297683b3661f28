"""What a session to one backend hands to the backend actor: `SessionHooks`.

Both kinds of session (client.py and sdk_client.py) call these; the actor (actor.py)
builds them. A module of its own so that neither session imports the other's module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import mcp_types as types


@attrs.frozen(kw_only=True, eq=False)
class SessionHooks:
    """Where a session sends what its backend says unasked, and what it asks of assern."""

    #: a tools, prompts or resources list changed: the listing is to be fetched again
    list_changed: Callable[[], None]
    #: a notification clients should see (resources/updated, a log message)
    notify: Callable[[types.ServerNotification], None]
    #: a message that could not be understood, and why (it is skipped)
    bad_message: Callable[[str], None]
    #: a server-to-client request (sampling, elicitation, roots) for a client to answer:
    #: its method and params in, the result dict out; raises RpcError to refuse it
    ask: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
    #: one line the backend process wrote to its stderr
    stderr: Callable[[str], None] = lambda _line: None
    #: the backend process was started, with this pid
    spawned: Callable[[int], None] = lambda _pid: None
    #: the connection to the backend is gone for good (an SSE backend's event stream
    #: ended), and why: the backend has exited as far as assern can tell
    lost: Callable[[str], None] = lambda _why: None
