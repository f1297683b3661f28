"""The application shell: the root tree's wiring, the `assern` and `assernctl` commands,
instance identity and election, the control client, detaching, the stdio front door and
the proxy. It is the only package that knows every actor; nothing imports it."""
