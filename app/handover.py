"""The resuming bridge: a daemon connection's `assern serve` that carries its client's
session across a daemon that died, hung or was superseded.

app/quick.py's `daemon_shim` joins the workstation daemon and then replaces itself with
this module run by a bare interpreter (`python -I -S`, `exec_handover`):
like app/bridge.py, it keeps nothing of what the start imported. Unlike it, it reads
the client's lines and the daemon's lines as JSON-RPC (a line it cannot parse passes
unchanged) and shows them to a `SessionRecord` (app/session_record.py).

When the daemon goes away without our client having caused it (the socket ends or
fails, or the liveness check below gives up on it), and not on purpose (a daemon that
stops, `assernctl shutdown` or SIGTERM, removes its socket file first: its sessions end
with it, as app/bridge.py's did), the bridge:

1. answers each client request that was in flight there with an error ("the assern
   daemon stopped while this request ran; it was not retried"), at once: never a hang,
   never sent twice; the client's answers to that daemon's requests are dropped;
2. connects to the current daemon (starting one when none answers, as app/daemon/
   launch.py does), sends the hello again (built as the start built it: same folder,
   same environment, the `--config`, `--project` and `--profile` on our argv), reads the
   welcome;
3. replays the session: the client's `initialize` under an id of our own (its answer is
   not forwarded), `notifications/initialized`, the log level, the subscriptions (their
   answers swallowed), and `subscriptions/listen` streams under their own ids; and asks
   the lists the client was given again, under ids of our own: a list that differs sends
   the client its `notifications/*/list_changed`;
4. goes on with what the client sent meanwhile (held in the pipe from the client, which
   the kernel bounds) and logs one `session_resumed` line.

A resume is bounded: when no daemon welcomes us within `RESUME_TIMEOUT` seconds, every
request in flight gets an error saying so, one line goes to stderr, and the bridge exits
with status 1.

The client leaving while we wait for a daemon (a resume, or the daemon we started coming
up): every wait of a join (`Watch`: the daemon's start, its welcome, the replayed
`initialize`, the pause between tries) polls the client's stdin for a hang-up only
(POLLHUP and POLLERR, which a pipe or terminal reports unasked; POLLRDHUP for a socket
whose peer shut its write side, where the platform has it), never for its lines: what a
client that stays writes meanwhile waits in the pipe, in order, for the joined session.
A client that closed stdin ends the bridge at once, as closing stdin does otherwise
(status 0); its requests that no daemon got (held, or left in the pipe) are answered
with an error when stdout takes it without waiting. A file or /dev/null as stdin,
relayed through a thread (epoll refuses them), is not watched: its end is no client
leaving, and its lines are sent once a daemon joins. Nothing of this runs while the
bridge bridges: the call path is unchanged.

Liveness: a daemon that hangs without dying. Only while a client request waits and the
daemon has sent nothing for `ASSERN_DAEMON_LIVENESS` seconds (default `LIVENESS`) does
the bridge send a request of its own (`SessionRecord.probe`); a daemon that answers
nothing within as long again is treated as gone (the bound: twice the setting). The
call path pays one clock reading per line.

Supersede: a daemon being replaced sends `assern/superseded`. The bridge then joins the
new daemon (the same replay) and sends it every new request, while the calls in flight
on the old connection finish there; it closes the old connection once nothing is open
on it (the old daemon drains meanwhile, app/daemon/supersede.py).

How the bridge ends is as app/bridge.py's: the client closes stdin (status 0, also while
a daemon is being joined), a stop signal (128 + its number), or a resume that found no
daemon (status 1). Each end writes one `proxy_stopped` line to the log.

Standard library only; the modules of assern it needs to join again (app/daemon/hello.py,
launch.py: standard library only as well) are imported when it first resumes.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import socket
import stat
import sys
import time

if __name__ == "__main__":  # run as a file by `python -I -S`: find the package ourselves
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from assern.app.bridge import CHUNK, DRAIN_TIMEOUT, Stopped, exec_module, log_event
from assern.app.session_record import DROP, SessionRecord, line_of, lost_error

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any

    from assern.app.first_answers import EarlyAnswers

#: Seconds a resume may take to find a daemon that welcomes us.
RESUME_TIMEOUT = 30.0
#: Seconds one daemon may take to welcome us (and answer the replayed `initialize`)
#: before the resume tries again.
WELCOME_WAIT = 5.0
#: Seconds of silence from the daemon, while a request waits, before a `ping`; as long
#: again without an answer and the daemon is treated as gone.
LIVENESS = 10.0
LIVENESS_VARIABLE = "ASSERN_DAEMON_LIVENESS"
RETRY_PAUSE = 0.05
#: Seconds between tries of the socket of a daemon we started, while its client is
#: answered from the kept session.
EARLY_POLL = 0.01
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_STOPPED = "the assern daemon was stopped while this request ran"
_GIVE_UP = "the assern daemon stopped and no daemon answered within {:g} s; this request was not sent"
_LEFT = "the client closed its input before a daemon was joined; this request was not sent"
#: What `poll` reports of a stdin whose client is gone (POLLHUP, POLLERR and POLLNVAL
#: even when not asked for; POLLRDHUP, a socket's peer that shut its write side, where
#: the platform has it).
_HUNG_UP = select.POLLHUP | select.POLLERR | select.POLLNVAL | getattr(select, "POLLRDHUP", 0)


def liveness(environ: dict[str, str] | os._Environ[str]) -> float:
    """`ASSERN_DAEMON_LIVENESS` in seconds (a number > 0), else `LIVENESS`."""
    try:
        value = float(environ.get(LIVENESS_VARIABLE, ""))
    except ValueError:
        return LIVENESS
    return value if 0 < value < float("inf") else LIVENESS


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def complete_lines(pending: bytearray, chunk: bytes) -> list[bytes]:
    """The complete lines `chunk` ends, each with its newline; what follows the last
    newline stays in `pending` (changed in place) for the next chunk."""
    if not pending and chunk and chunk.find(b"\n") == len(chunk) - 1:
        return [chunk]  # the usual read: one whole line, nothing held before it
    pending += chunk
    if b"\n" not in chunk:
        return []
    *complete, rest = bytes(pending).split(b"\n")
    pending[:] = rest
    return [line + b"\n" for line in complete]


def unsent_errors(lines: list[bytes]) -> list[bytes]:
    """The errors that answer the requests among the client's `lines` that no daemon got
    (its notifications and answers need none; a line that is no JSON is skipped)."""
    errors = []
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or message.get("id") is None:
            continue
        if isinstance(message.get("method"), str):
            errors.append(lost_error(message["id"], _LEFT))
    return errors


def _offer(fd: int, data: bytes) -> bool:
    """Write `data` (one line) to `fd` when it takes it now, whole, without waiting: a
    pipe with room for it (at most PIPE_BUF bytes), a file, a terminal; False when not."""
    if len(data) > select.PIPE_BUF:
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    if not poll.poll(0):
        return False
    try:
        os.write(fd, data)
    except OSError:
        return False  # its reader is gone
    return True


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


class Gone(Exception):
    """No daemon could be joined within the resume's bound (the message says why)."""


class Ended(Gone):
    """The daemon was stopped on purpose: its socket file is gone with it."""


class ClientLeft(Exception):
    """Our client closed stdin while the bridge waited for a daemon to join."""


class Watch:
    """The waits of a resume: on a daemon's socket, or a pause, while the client's stdin
    is watched for a hang-up only. Nothing of stdin is read: what the client writes
    meanwhile waits in the pipe, in order, until the session is joined."""

    def __init__(self, stdin: int | None) -> None:
        self.poll = select.poll()
        self.stdin = stdin
        if stdin is not None:
            try:
                is_socket = stat.S_ISSOCK(os.fstat(stdin).st_mode)
            except OSError:
                is_socket = False
            # A pipe or a terminal reports a hang-up unasked (mask 0: no read is woken
            # by the client's lines); a socket's peer that only shut its write side is
            # POLLRDHUP.
            self.poll.register(stdin, getattr(select, "POLLRDHUP", 0) if is_socket else 0)

    def wait(self, sock: socket.socket | None, seconds: float) -> bool:
        """Whether `sock` became readable (or failed) within `seconds`; with no `sock`, a
        pause of `seconds`.

        Raises:
            ClientLeft: the client's stdin hung up meanwhile.
        """
        if sock is not None:
            self.poll.register(sock, select.POLLIN)
        try:
            deadline = time.monotonic() + seconds
            while True:
                for fd, events in self.poll.poll(max(0.0, deadline - time.monotonic()) * 1000):
                    if fd == self.stdin and events & _HUNG_UP:
                        raise ClientLeft
                    if sock is not None and fd == sock.fileno():
                        return True
                if time.monotonic() >= deadline:
                    return False
        finally:
            if sock is not None:
                self.poll.unregister(sock)

    def pause(self, seconds: float) -> None:
        """Wait `seconds` (what app/daemon/launch.py's waits take).

        Raises:
            ClientLeft: the client's stdin hung up meanwhile.
        """
        self.wait(None, seconds)


def _relay(fd: int) -> int:
    """The read end of a pipe that a thread fills from `fd` (which epoll cannot watch)."""
    import threading

    read_end, write_end = os.pipe()

    def copy() -> None:
        try:
            while chunk := os.read(fd, CHUNK):
                _write_all(write_end, chunk)
        except OSError:
            pass
        os.close(write_end)

    threading.Thread(target=copy, name="assern-stdin", daemon=True).start()
    return read_end


class Link:
    """One connection to a daemon: its number, socket and what was read of a line."""

    def __init__(self, number: int, sock: socket.socket) -> None:
        self.number = number
        self.sock = sock
        self.pending = bytearray()
        self.heard = time.monotonic()
        self.ping_sent: float | None = None

    def lines(self, chunk: bytes) -> list[bytes]:
        """The complete lines `chunk` ends (each with its newline)."""
        return complete_lines(self.pending, chunk)


class Handover:
    """The bridge's loop (see the module)."""

    def __init__(
        self,
        sock: socket.socket | None,
        join: dict[str, Any],
        *,
        log_file: str | None,
        log_level: str,
        stdin: int = 0,
        stdout: int = 1,
        early: EarlyAnswers | None = None,
    ) -> None:
        self.join = join
        self.log_file = log_file
        self.log_level = log_level
        self.stdin = stdin
        self.stdout = stdout
        self.record = SessionRecord()
        if join.get("answers"):
            self.record.on_answer = self._keep_answer
        #: the daemon connection (none yet while a daemon we started comes up: `early`)
        self.current: Link
        if sock is not None:
            self.current = Link(0, sock)
        self.early = early
        #: the client's lines held until a daemon we started welcomes us
        self.held: list[bytes] = []
        self._client_line = self._send_client_line
        self.draining: list[Link] = []
        self.client_pending = bytearray()
        self.liveness = liveness(os.environ)
        self.waiting_since: float | None = None  # when the oldest unanswered request was sent
        self.resumes = 0
        #: the waits of a resume, stdin watched for a hang-up (made by `run`)
        self.watch = Watch(None)
        #: a file's end reached while a daemon we started comes up, its requests held
        self.input_ended = False
        #: the client's requests that no daemon got, its stdin closed before one joined
        self.unsent = 0

    # ------------------------------------------------------------------ the loop

    def run(self) -> str:
        """Bridge until the client ends ("client") or no daemon could be joined ("gone")."""
        selector = selectors.DefaultSelector()
        self.selector = selector
        try:
            selector.register(self.stdin, selectors.EVENT_READ, None)
            self.watch = Watch(self.stdin)
        except (PermissionError, ValueError):  # a file or /dev/null: epoll refuses them
            # Their end is the file's end, not a client leaving: a resume does not watch
            # it, and the file's lines are sent once the session is joined.
            self.stdin = _relay(self.stdin)
            selector.register(self.stdin, selectors.EVENT_READ, None)
        timeout = None
        with selector:
            try:
                if self.early is None:
                    selector.register(self.current.sock, selectors.EVENT_READ, self.current)
                else:
                    self._start_early()
                    if self.input_ended:
                        return self._client_ended()
                while True:
                    for key, _events in selector.select(timeout):
                        if key.data is None:
                            if not self._from_client():
                                return self._client_ended()
                        else:
                            self._from_daemon(key.data)
                    timeout = self._liveness()
            except ClientLeft:
                return self._client_left()

    def _client_ended(self) -> str:
        """Our client closed stdin: shut the write side so the daemon ends the session,
        and wait (at most DRAIN_TIMEOUT) for it to hang up."""
        for link in (self.current, *self.draining):
            try:
                link.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        deadline = time.monotonic() + DRAIN_TIMEOUT
        self.current.sock.settimeout(DRAIN_TIMEOUT)
        try:
            while time.monotonic() < deadline:
                chunk = self.current.sock.recv(CHUNK)
                if not chunk:
                    break
                for line in self.current.lines(chunk):
                    self._daemon_line(line, self.current)
        except OSError:
            pass
        for link in (self.current, *self.draining):
            link.sock.close()
        return "client"

    def _client_left(self) -> str:
        """Our client closed stdin while the bridge waited for a daemon to join: end at
        once, as when it closes stdin. A daemon still joined (one being superseded) gets
        what the client wrote last and ends the session as usual; otherwise each request
        of the client that no daemon got is answered with an error, when stdout takes it
        without waiting (a client that left may read no more)."""
        current: Link | None = getattr(self, "current", None)
        if current is not None and current.sock.fileno() != -1:
            while self._from_client():
                pass  # the client is gone: what is left in its pipe is read at once
            return self._client_ended()
        unsent, self.held = self.held, []
        while True:
            try:
                chunk = os.read(self.stdin, CHUNK)
            except OSError:
                break
            if not chunk:
                break
            unsent += complete_lines(self.client_pending, chunk)
        errors = unsent_errors(unsent)
        self.unsent = len(errors)
        for error in errors:
            if not _offer(self.stdout, error):
                break
        for link in self.draining:
            link.sock.close()
        return "client"

    def _from_client(self) -> bool:
        """Forward what the client wrote; False once it closed stdin."""
        try:
            chunk = os.read(self.stdin, CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            return False
        for line in complete_lines(self.client_pending, chunk):
            self._client_line(line)
        return True

    def _send_client_line(self, line: bytes) -> None:
        link = self.current
        if not self.draining and not self.record.dead_daemon_requests:
            # Every line goes to the current daemon then (no other holds a request, and
            # no answer is to be dropped): sent first, read after, off the call's path.
            self._send(link, line)
            self.record.from_client(line, link.number)
            return
        target = self.record.from_client(line, link.number)
        if target == DROP:
            return
        if target != link.number:
            link = next((k for k in self.draining if k.number == target), link)
        self._send(link, line)

    def _send(self, link: Link, line: bytes) -> None:
        if self.waiting_since is None:
            self.waiting_since = time.monotonic()
        try:
            link.sock.sendall(line)
        except OSError:
            pass  # the reader finds the connection gone and resumes

    def _from_daemon(self, link: Link) -> None:
        try:
            chunk = link.sock.recv(CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            self._lost(link)
            return
        link.heard = time.monotonic()
        link.ping_sent = None
        for line in link.lines(chunk):
            self._daemon_line(line, link)
        if self.record.superseded is not None:
            self._supersede()  # before any later line of the client is sent
        if link is self.current:
            if self.waiting_since is not None and not self.record.waiting(link.number):
                self.waiting_since = None
        elif link in self.draining and not self.record.in_flight(link.number):
            self._close(link)

    def _daemon_line(self, line: bytes, link: Link) -> None:
        seen = self.record.from_daemon(line, link.number)
        if seen is True:
            _write_all(self.stdout, line)
        elif seen is not False:
            notice = self.record.changed(*seen)
            if notice is not None:
                _write_all(self.stdout, notice)

    def _close(self, link: Link) -> None:
        try:
            self.selector.unregister(link.sock)
        except (KeyError, ValueError):
            pass
        link.sock.close()
        if link in self.draining:
            self.draining.remove(link)

    # ------------------------------------------------------------------ a daemon we started

    def _start_early(self) -> None:
        """Answer what the kept session can (app/first_answers.py) until the daemon we
        started accepts, then join it as a resume does and send it what was held.

        Raises:
            Gone: no daemon came up (its stderr file says why); the held requests fail.
            ClientLeft: the client closed stdin first.
        """
        from assern.app.daemon.launch import START_TIMEOUT, alive, connect_once

        assert self.early is not None
        self._client_line = self._early_line
        path, pid = self.join["socket"], self.join.get("starting")
        started = time.monotonic()
        deadline = started + START_TIMEOUT
        try:
            while (first := connect_once(path)) is None:
                if not (isinstance(pid, int) and alive(pid)) and (first := connect_once(path)) is None:
                    raise Gone("the workstation daemon did not start; see its log (`assernctl logs`)")
                if time.monotonic() >= deadline:
                    raise Gone(f"the workstation daemon did not start within {START_TIMEOUT:g} s")
                if self.input_ended:
                    time.sleep(EARLY_POLL)
                elif self.selector.select(EARLY_POLL) and not self._from_client():
                    self._input_closed()
            self._client_line = self._send_client_line
            self._join(0, first)
        except Gone:
            for line in self.held:  # in flight now: failed with the rest
                self.record.from_client(line, 0)
            raise
        held, self.held = self.held, []
        log_event(
            self.log_file,
            self.log_level,
            "daemon_joined",
            socket=path,
            started_s=round(time.monotonic() - started, 3),
            answered_early=self.early.answered,
            held=len(held),
        )
        for line in held:
            self._send_client_line(line)

    def _input_closed(self) -> None:
        """stdin ended before the daemon we started accepts: a client that left, or the
        end of a file whose requests are held (sent once the daemon joins, and then the
        session ends as at the end of stdin).

        Raises:
            ClientLeft: a client that left, or nothing was held.
        """
        if self.watch.stdin is not None or not self.held:
            raise ClientLeft
        self.input_ended = True
        self.selector.unregister(self.stdin)

    def _early_line(self, line: bytes) -> None:
        """A client's line before the daemon we started is there: answered from the kept
        session when it can be (`initialize`, a first list, `ping`), else held."""
        assert self.early is not None
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            method, ident, params = message["method"], message.get("id"), message.get("params")
            params = params if isinstance(params, dict) else {}
            if ident is not None:
                result = self.early.result(method, params)
                if result is not None:
                    self.early.answered += 1
                    self.record.answered_early(message, result)
                    _write_all(self.stdout, line_of({"jsonrpc": "2.0", "id": ident, "result": result}))
                    return
            elif method == "notifications/initialized" and self.early.entry is not None:
                self.record.from_client(line, 0)  # the replay sends it
                return
        self.held.append(line)

    def _keep_answer(self, method: str, request: dict[str, Any], result: object) -> None:
        """Keep a daemon's answer to our client's `initialize` or first list page for the
        next identical start (app/first_answers.py)."""
        from assern.app.first_answers import keep_answer, session_key

        if method == "initialize":
            if self.join.get("initialize_unsettled"):
                return  # answered before the daemon knew every backend's capabilities
            params = request.get("params")
        else:
            asked = request.get("params")
            paged = isinstance(asked, dict) and asked.get("cursor") is not None
            if self.record.initialize is None or paged:
                return
            params = self.record.initialize.get("params")
        keep_answer(self.join["answers"], self.join["build"], session_key(params), method, result)

    # ------------------------------------------------------------------ liveness

    def _liveness(self) -> float | None:
        """Probe the current daemon, or give up on it, when its time came (see the
        module); the seconds until the next check, None while no request waits. One
        clock reading when a request waits, none otherwise."""
        if self.waiting_since is None or not self.record.waiting(self.current.number):
            return None
        link = self.current
        now = time.monotonic()
        if link.ping_sent is not None:
            if now - link.ping_sent < self.liveness:
                return link.ping_sent + self.liveness - now
            self._lost(link, why="hung")
            return self._liveness()  # a new daemon's session: nothing waits there yet
        since = max(link.heard, self.waiting_since)
        if now - since < self.liveness:
            return since + self.liveness - now
        link.ping_sent = now
        try:
            link.sock.sendall(self.record.probe())
        except OSError:
            self._lost(link)
            return self._liveness()
        return self.liveness

    # ------------------------------------------------------------------ resume

    def _lost(self, link: Link, why: str = "stopped") -> None:
        """A daemon connection ended that our client did not end."""
        errors = self.record.lost(link.number)
        for error in errors:
            _write_all(self.stdout, error)
        self._close(link)
        if link is not self.current:
            return
        if why == "stopped" and not os.path.exists(self.join["socket"]):
            # `assernctl shutdown`, SIGTERM: a daemon that stops removes its socket file
            # (a killed one leaves it; a successor's is there): the session ends with it.
            raise Ended("the assern daemon was stopped", len(errors))
        started = time.monotonic()
        try:
            self._join(self.current.number + 1)
        except Gone as gone:
            raise Gone(str(gone), len(errors)) from None
        self.resumes += 1
        log_event(
            self.log_file,
            self.log_level,
            "session_resumed",
            why=why,
            resume_s=round(time.monotonic() - started, 3),
            requests_failed=len(errors),
            link=self.current.number,
        )

    def _supersede(self) -> None:
        """The daemon is being replaced: new requests go to the new one, the calls in
        flight finish on the old connection (closed once nothing is open on it)."""
        told = self.record.superseded
        self.record.superseded = None
        old = self.current
        started = time.monotonic()
        try:
            self._join(old.number + 1)
        except Gone as gone:  # the old daemon goes on serving until it closes
            log_event(self.log_file, self.log_level, "session_not_moved", error=str(gone.args[0]))
            return
        self.draining.append(old)
        if not self.record.in_flight(old.number):
            self._close(old)
        log_event(
            self.log_file,
            self.log_level,
            "session_resumed",
            why="superseded",
            by=(told or {}).get("build"),
            resume_s=round(time.monotonic() - started, 3),
            requests_failed=0,
            link=self.current.number,
        )

    def _join(self, number: int, first: socket.socket | None = None) -> None:
        """Connect to the current daemon (`first`: already connected) and replay the
        session, within RESUME_TIMEOUT. Every wait watches the client's stdin (`Watch`).

        Raises:
            Gone: no daemon welcomed us in time, or one refused us (the message says).
            ClientLeft: the client closed stdin meanwhile (the socket tried is closed).
        """
        deadline = time.monotonic() + RESUME_TIMEOUT
        why = "no daemon answered"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Gone(f"{why} within {RESUME_TIMEOUT:g} s")
            sock, why = self._connect(remaining, first)
            first = None
            if sock is not None:
                link = Link(number, sock)
                try:
                    early = self._replay_initialize(link, min(remaining, WELCOME_WAIT))
                except ClientLeft:
                    sock.close()
                    raise
                if early is not None:
                    break
                sock.close()
                why = "the daemon did not answer the session's initialize"
            self.watch.pause(RETRY_PAUSE)
        sock.settimeout(None)
        self.current = link
        self.selector.register(sock, selectors.EVENT_READ, link)
        self.waiting_since = None
        for line in self.record.replay(number):
            sock.sendall(line)
        for line in early:
            self._daemon_line(line, link)

    def _connect(
        self, remaining: float, first: socket.socket | None = None
    ) -> tuple[socket.socket | None, str]:
        """A socket to the current daemon (`first`, or one started when none answers)
        that welcomed our hello, or None and why.

        Raises:
            Gone: the daemon refused this session (the message says why).
            ClientLeft: the client closed stdin meanwhile (`first` is closed).
        """
        from assern.app.daemon.launch import connect_once, start_daemon

        path = self.join["socket"]
        sock = first if first is not None else connect_once(path)
        if sock is None:
            started, message = start_daemon(self.join["home"], os.environ, path, pause=self.watch.pause)
            if started is None:
                return None, message
            sock = started
        wait = min(remaining, WELCOME_WAIT)
        sock.settimeout(wait)
        try:
            sock.sendall(self._hello())
        except OSError:
            sock.close()
            return None, "the daemon hung up"
        try:
            # The welcome is one write: once its first byte is there, read_welcome does
            # not wait long (its socket's timeout bounds a daemon that stops half-way).
            ready = self.watch.wait(sock, wait)
        except ClientLeft:
            sock.close()
            raise
        from assern.app.daemon.hello import read_welcome

        welcome = read_welcome(sock) if ready else None
        if welcome is None:
            sock.close()
            return None, "the daemon did not welcome this session"
        if welcome.get("method") == "assern/refused":
            sock.close()
            params = welcome.get("params")
            raise Gone(str(params.get("error") if isinstance(params, dict) else welcome))
        if self.early is not None and not hasattr(self, "current"):
            # the first welcome of a daemon we started: what the start prints (app/quick.py)
            params = welcome.get("params")
            params = params if isinstance(params, dict) else {}
            for warning in params.get("warnings") or ():
                print(f"assern: warning: {warning}", file=sys.stderr, flush=True)
            for notice in params.get("notices") or ():
                print(notice, file=sys.stderr, flush=True)
        return sock, ""

    def _hello(self) -> bytes:
        from assern.app.daemon.hello import hello_line

        join = self.join
        return hello_line(
            cwd=os.getcwd(),
            environ=os.environ,
            config=join.get("config"),
            project=join.get("project"),
            profile=join.get("profile"),
            build=join.get("build"),
            resumes=True,
        )

    def _replay_initialize(self, link: Link, wait: float) -> list[bytes] | None:
        """Send the client's `initialize` (ours) and wait for its answer: the lines the
        daemon sent meanwhile, or None when it did not answer within `wait`.

        Raises:
            ClientLeft: the client closed stdin meanwhile.
        """
        line = self.record.initialize_line()
        if line is None:
            return []  # a 2026-07-28 client: nothing to initialize
        try:
            link.sock.sendall(line)
            deadline = time.monotonic() + wait
            early: list[bytes] = []
            while time.monotonic() < deadline:
                left = max(0.01, deadline - time.monotonic())
                if not self.watch.wait(link.sock, left):
                    return None
                link.sock.settimeout(left)
                chunk = link.sock.recv(CHUNK)
                if not chunk:
                    return None
                answered = False
                for got in link.lines(chunk):
                    # The rest is seen again, in order, once the session is replayed
                    # (what the record keeps of a notification or a request is kept twice
                    # alike; no answer to the client can come before the replay).
                    if not answered and isinstance(self.record.from_daemon(got, link.number), tuple):
                        answered = True
                    else:
                        early.append(got)
                if answered:
                    return early
        except OSError:
            pass
        return None


def run_handover(
    sock: socket.socket | None,
    join: dict[str, Any],
    *,
    log_file: str | None,
    log_level: str = "info",
    early: EarlyAnswers | None = None,
) -> int:
    """Bridge and resume until the client ends; log it; the exit status. With no `sock`,
    the daemon we started is joined once it accepts, the client answered from `early`
    meanwhile."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _stop)
    handover = Handover(sock, join, log_file=log_file, log_level=log_level, early=early)
    try:
        ended = handover.run()
    except Stopped as stop:
        log_event(log_file, log_level, "proxy_stopped", ended_by="signal", signal=stop.signum, slot="daemon")
        return 128 + stop.signum
    except Gone as gone:
        message = str(gone.args[0])
        why = _STOPPED if isinstance(gone, Ended) else _GIVE_UP.format(RESUME_TIMEOUT)
        for error in handover.record.fail_all(why):
            try:
                _write_all(handover.stdout, error)
            except OSError:
                break
        log_event(log_file, log_level, "proxy_stopped", ended_by="primary", slot="daemon", error=message)
        if isinstance(gone, Ended):
            print("assern: the shared instance closed the connection", file=sys.stderr, flush=True)
        else:
            print(f"assern: no daemon to resume this session on: {message}", file=sys.stderr, flush=True)
        return 1
    unsent = {"unsent": handover.unsent} if handover.unsent else {}
    resumes = handover.resumes
    log_event(log_file, log_level, "proxy_stopped", ended_by=ended, slot="daemon", resumes=resumes, **unsent)
    return 0


def exec_handover(sock: socket.socket | None, join: dict[str, Any], *, log_file: str, log_level: str) -> None:
    """Replace this process with the resuming bridge over `sock` (same pid, stdio,
    environment and folder). `join` (the socket path, ASSERN_HOME, build, --config,
    --project, --profile, the kept answers' file, the pid of a daemon we started:
    nothing secret) goes on the argv; the environment never does (/proc/PID/cmdline is
    readable by others). No `sock`: the daemon we started (`join["starting"]`) is joined
    once it accepts, the client answered from the kept session (`join["answers"]`)
    meanwhile."""
    if sock is not None:
        os.set_inheritable(sock.fileno(), True)
    arguments = [str(sock.fileno()) if sock is not None else "-", log_file, log_level, json.dumps(join)]
    exec_module("assern.app.handover", arguments)


def main(argv: Sequence[str] | None = None) -> int:
    """`main()` with argv `FD LOG_FILE LOG_LEVEL JOIN` (what `exec_handover` runs)."""
    args = sys.argv[1:] if argv is None else argv
    join = None
    if len(args) == 4 and (args[0].isdigit() or args[0] == "-"):
        try:
            join = json.loads(args[3])
        except ValueError:
            join = None
    if not isinstance(join, dict) or not isinstance(join.get("socket"), str):
        print("usage: python -I -S handover.py FD|- LOG_FILE LOG_LEVEL JOIN (internal)", file=sys.stderr)
        return 2
    if args[0] != "-":
        return run_handover(socket.socket(fileno=int(args[0])), join, log_file=args[1], log_level=args[2])
    from assern.app.first_answers import EarlyAnswers, load_sessions

    answers = join.get("answers")
    sessions = load_sessions(answers, str(join.get("build"))) if isinstance(answers, str) else {}
    return run_handover(None, join, log_file=args[1], log_level=args[2], early=EarlyAnswers(sessions))


if __name__ == "__main__":
    sys.exit(main())
