"""What both ends of an instance's Unix sockets agree on before any message: who the
peer is (its credentials) and which control protocol version is spoken.

Standard library only: the client side (`assernctl`, the election, the quick proxy path
of app/quick.py) imports it without the server side.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

#: The control socket's protocol version (actors/listener/control_protocol.py).
PROTOCOL_VERSION = 1


def peer_credentials(sock: socket.socket) -> tuple[int | None, int | None]:
    """(uid, pid) of the process at the other end of a connected Unix socket.

    The pid is known on Linux only. (None, None) when the platform cannot tell.
    """
    if hasattr(socket, "SO_PEERCRED"):
        data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", data)
        return uid, pid
    if sys.platform == "darwin" or "bsd" in sys.platform:
        sol_local, local_peercred = 0, getattr(socket, "LOCAL_PEERCRED", 1)
        # struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }
        data = sock.getsockopt(sol_local, local_peercred, struct.calcsize("IIh2x16I"))
        _version, uid = struct.unpack_from("II", data)
        return uid, None
    return None, None


def same_user(sock: socket.socket) -> bool:
    """Whether the peer runs as our own uid (unknown credentials never pass)."""
    try:
        uid, _pid = peer_credentials(sock)
    except OSError:
        return False
    return uid == os.getuid()
