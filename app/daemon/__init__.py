"""The workstation daemon: one per `$ASSERN_HOME`, every project's clients served by it.

`hello.py` is the first line a client's `assern serve` sends it (standard library only);
`host.py` runs the daemon: its sockets, one view (a tree of its own) per configuration its
clients resolve to, all drawing their backends from one shared pool
(actors/backend/pool.py).
"""
