"""JSON-RPC pieces both sides of assern share: the client's connection and the backends'."""
