"""Only the instance's own user is served on its Unix sockets, tested without root.

A real second user connecting (tests/e2e/test_sharing.py) needs root: the kernel
reports the connecting process's real uid (`SO_PEERCRED`), and an unprivileged user can
start no process under another uid (a user namespace maps only its own). So here: the
decision fed a foreign uid, the credentials the kernel reports on a real socket, and the
listener refusing a real connection whose peer is reported as another user.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import pytest
import structlog.testing

from assern.actors.listener import actor as listener_actor
from assern.actors.listener.actor import REFUSED, ListenerActor, refusal_for
from assern.actors.listener.socket_basics import peer_credentials, same_user
from assern.actors.listener.unix_socket import UnixListener

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ME = os.getuid()
OTHER = 65534 if ME != 65534 else 65533  # `nobody`, unless that is who runs the suite


def test_another_users_uid_or_an_unknown_one_is_refused_and_ours_is_served() -> None:
    said = f"refused: this assern serves uid {ME} only"
    mcp = refusal_for(OTHER, ME, control=False)
    assert mcp is not None
    assert json.loads(mcp) == {"jsonrpc": "2.0", "id": None, "error": {"code": REFUSED, "message": said}}
    control = refusal_for(OTHER, ME, control=True)
    assert control is not None
    assert json.loads(control) == {
        "v": 1,
        "id": None,
        "ok": False,
        "error": {"code": "forbidden", "message": said},
    }
    assert refusal_for(None, ME, control=False) == mcp  # credentials the platform cannot tell
    assert refusal_for(None, ME, control=True) == control
    assert refusal_for(ME, ME, control=False) is None
    assert refusal_for(ME, ME, control=True) is None


@contextmanager
def connected(tmp_path: Path) -> Iterator[tuple[socket.socket, socket.socket]]:
    """(our client's socket, the connection the instance's listener accepted)."""
    listener = UnixListener.bind(tmp_path / "assern.sock")
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(listener.path))
        accepted, _ = listener.sock.accept()
        yield client, accepted
    finally:
        client.close()
        listener.withdraw()


def test_the_kernel_reports_the_connecting_process_as_our_own_user(tmp_path: Path) -> None:
    with connected(tmp_path) as (client, accepted):
        assert peer_credentials(accepted) == (ME, os.getpid())
        assert refusal_for(peer_credentials(accepted)[0], ME, control=False) is None
        assert same_user(client)  # and the client's check of the instance passes too
        accepted.close()


@pytest.mark.parametrize(("control", "kind"), [(False, "mcp"), (True, "control")])
def test_a_connection_from_another_user_is_told_why_and_closed_unserved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, control: bool, kind: str
) -> None:
    monkeypatch.setattr(listener_actor, "peer_credentials", lambda sock: (OTHER, 4242))
    listener = ListenerActor(cast("Any", None), cast("Any", None))
    served: list[socket.socket] = []

    async def serve(sock: socket.socket) -> None:
        served.append(sock)

    with connected(tmp_path) as (client, accepted):
        with structlog.testing.capture_logs() as logs:
            listener._admit(accepted, serve, control=control)
        client.settimeout(5)
        answer = b""
        while chunk := client.recv(4096):  # until the instance hangs up
            answer += chunk
        assert answer == refusal_for(OTHER, ME, control=control)
        assert accepted.fileno() == -1  # closed
    assert served == []
    assert logs == [
        {
            "event": "connection_refused",
            "log_level": "warning",
            "socket": kind,
            "peer_uid": OTHER,
            "peer_pid": 4242,
        }
    ]
