"""`trust.untrusted`: a project folder's own configuration waits for `assernctl trust`.

The facts are the resolved configuration's trust report (actors/config/trust.py): the
folders whose files were left out, and whether the trust store could be used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assern.actors.config.trust import untrusted_projects
from assern.app.ctl.doctor.finding import Finding, ok, warn

if TYPE_CHECKING:
    from assern.app.ctl.doctor.facts import Facts

TRUST = "trust.untrusted"


def trust_untrusted(facts: Facts) -> list[Finding]:
    """ok when every folder the configuration reads is trusted (or none needs it); a
    warning per folder whose files wait, with the command that reviews and allows them."""
    config = facts.config
    if config is None:
        return []
    found = []
    if config.trust.store_problem is not None:
        store = config.trust.store
        summary = f"the trust store {store} is ignored: {config.trust.store_problem}"
        fix = f"repair or remove {store}, then run `assernctl trust FOLDER` for each project again"
        found.append(warn(TRUST, summary, fix))
    found += [warn(TRUST, untrusted.line(), untrusted.command) for untrusted in untrusted_projects(config)]
    return found or [ok(TRUST, "no project folder's configuration waits for trust here")]
