"""Proxy mode: our stdio bridged byte for byte to a running primary's MCP socket.

The bytes are not parsed: every request, response, notification, cancellation and
server-to-client request passes both ways unchanged, so the client cannot tell a proxy
from the primary. No tree and no backend runs in a proxy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import structlog
import trio

from assern.actors.listener.stdio import claim_stdio

if TYPE_CHECKING:
    import socket

log = structlog.get_logger()

CHUNK = 65536
#: After our client closed stdin, how long the primary may take to finish and hang up.
DRAIN_TIMEOUT = 5.0

_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

Ended = Literal["client", "primary"]


async def bridge(sock: socket.socket, *, drain_timeout: float = DRAIN_TIMEOUT) -> Ended:
    """Copy stdin to `sock` and `sock` to stdout until one side is done.

    When our client closes stdin, the socket's write side is shut so the primary ends
    that session as it would for stdio; we stop once it hangs up (or after
    `drain_timeout`). When the primary hangs up first, we stop at once.

    Returns:
        Which side ended the session: "client" or "primary".
    """
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    ended: list[Ended] = []
    with claim_stdio() as (stdin, stdout):
        async with stream, trio.open_nursery() as nursery:

            async def upstream() -> None:
                try:
                    while chunk := await stdin.receive_some(CHUNK):
                        await stream.send_all(chunk)
                except _GONE:
                    pass
                ended.append("client")
                try:
                    await stream.send_eof()
                except _GONE:
                    nursery.cancel_scope.cancel()
                    return
                nursery.cancel_scope.deadline = trio.current_time() + drain_timeout

            async def downstream() -> None:
                while True:
                    try:
                        chunk = await stream.receive_some(CHUNK)
                    except _GONE:
                        chunk = b""
                    if not chunk:
                        ended.append("primary")
                        break
                    try:
                        await stdout.send_all(chunk)
                    except _GONE:
                        ended.append("client")
                        break
                nursery.cancel_scope.cancel()

            nursery.start_soon(upstream)
            nursery.start_soon(downstream)
    return ended[0] if ended else "client"
