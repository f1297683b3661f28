"""The actors of the tree: config, router, backend, listener, each with its pure logic beside it."""
