"""A JSON-RPC error as an exception: what a request failed with, on either side of assern.

The aggregator speaks the handshake-era protocol itself (actors/listener/protocol.py,
actors/backend/client.py), so its errors are its own: `RpcError` carries the JSON-RPC
error object (code, message, data) without the `mcp` SDK. Only the paths that still run
on the SDK (HTTP backends, 2026-07-28 clients) convert at their edge (sdk.py).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types


class RpcError(Exception):
    """A JSON-RPC error response: received from a peer, or to answer a peer with."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC error object, as it goes on the wire."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @property
    def error(self) -> types.ErrorData:
        return types.ErrorData(code=self.code, message=self.message, data=self.data)

    @classmethod
    def from_dict(cls, error: Any) -> RpcError:
        """The error object of a peer's error response (whatever it holds)."""
        error = error if isinstance(error, dict) else {}
        code = error.get("code")
        return cls(
            code=code if isinstance(code, int) and not isinstance(code, bool) else types.INTERNAL_ERROR,
            message=str(error.get("message", "error")),
            data=error.get("data"),
        )
