"""What a handshake-era session sent lately, so a client that lost a stream resumes it.

The streamable-HTTP transport gives every SSE event it sends an id from the session's
event store. A client whose stream broke (a network blip, a proxy's timeout, a laptop
lid) sends a GET with `Last-Event-ID`; the transport asks the store for the events
of that stream after that id, sends them, then goes on with the stream live. Without a
store, whatever was sent while nobody listened is lost, and so is the answer of a call
whose POST stream broke.

`ReplayBuffer` keeps the session's last `capacity` events in memory (the id is the
event's number in the session, unique across its streams as the specification asks);
an id older than that, or one this session never gave, replays nothing. It also
counts how often each stream was resumed, so the front can tell a client that hung up
on a call (cancel it) from one that came back for the answer (keep it running).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId

if TYPE_CHECKING:
    from mcp_types import JSONRPCMessage


class ReplayBuffer(EventStore):
    """One session's last `capacity` SSE events, by stream."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a replay buffer holds at least one event")
        self._events: deque[tuple[int, StreamId, JSONRPCMessage | None]] = deque(maxlen=capacity)
        self._next = 1
        #: how often each stream was resumed with `Last-Event-ID`
        self.resumed: Counter[StreamId] = Counter()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Keep one event (None: a priming event, which only marks a place) and name it."""
        number = self._next
        self._next += 1
        self._events.append((number, stream_id, message))
        return str(number)

    def stream_of(self, event_id: EventId) -> StreamId | None:
        """The stream `event_id` was sent on, while the buffer still holds it."""
        number = _number(event_id)
        for held, stream, _ in self._events:
            if held == number:
                return stream
        return None

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the messages of `last_event_id`'s stream that came after it; that stream,
        or None when the buffer no longer holds (or never held) the event."""
        stream = self.stream_of(last_event_id)
        if stream is None:
            return None
        number = _number(last_event_id)
        self.resumed[stream] += 1
        later = [(n, m) for n, s, m in self._events if s == stream and n > number and m is not None]
        for held, message in later:
            await send_callback(EventMessage(message, str(held)))
        return stream


def _number(event_id: EventId) -> int:
    """An event id as the number it stands for (-1, matching nothing, when it is not one)."""
    return int(event_id) if event_id.isdigit() and len(event_id) < 19 else -1
