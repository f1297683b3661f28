"""One shared backend as one configuration sees it: its own name, spec and view.

The daemon runs one process per backend key (saved_catalog.backend_key: what reaches the
process) for every project whose configuration includes it, under whatever name each
configuration gives it. A `ViewedBackend` is what one configuration's connections hold:
the shared actor's state, status and spliced lane, with that configuration's server name,
spec (its timeouts) and view of the listing (`allowed`, rules). The actor itself keeps the
spec of the configuration that started it (pool.py says which).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from assern.actors.backend.handle import BackendView
    from assern.actors.backend.messages import Origin
    from assern.actors.backend.splice import CallReply, SplicedCall
    from assern.actors.backend.status import BackendState, BackendStatus
    from assern.actors.config.spec import ServerSpec
    from assern.actors.router.catalog import BackendListing


class ViewedBackend:
    """A `BackendView` of a shared backend under one configuration's name and spec."""

    __slots__ = ("_listing", "_seen", "actor", "name", "own_spec")

    def __init__(self, actor: BackendView, spec: ServerSpec) -> None:
        self.actor = actor
        self.own_spec = spec
        self.name = spec.name
        #: the actor's listing last seen, and this view of it (rebuilt when it changes)
        self._seen: BackendListing | None = None
        self._listing: BackendListing | None = None

    @property
    def status(self) -> BackendStatus:
        return attrs.evolve(self.actor.status, server=self.name)

    @property
    def state(self) -> BackendState:
        return self.actor.state

    @property
    def spec(self) -> ServerSpec:
        return self.own_spec

    @property
    def listing(self) -> BackendListing | None:
        listing = self.actor.listing
        if listing is None:
            return None
        if listing is not self._seen:
            self._seen = listing
            self._listing = attrs.evolve(
                listing, server=self.name, allowed=self.own_spec.allowed, rules=self.own_spec.rules
            )
        return self._listing

    @property
    def fast_path(self) -> bool:
        return self.actor.fast_path

    def splice(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        reply: CallReply,
        *,
        origin: Origin | None,
        request_id: str | int | None,
        progress: bool,
        meta: dict[str, Any] | None = None,
    ) -> SplicedCall | None:
        return self.actor.splice(
            name, arguments, reply, origin=origin, request_id=request_id, progress=progress, meta=meta
        )
