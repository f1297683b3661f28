"""Every check of `assernctl doctor`, in the order it prints them.

A check is a pure function of the `Facts` gathered once (`Check` in finding.py); it
gives one finding, or one per thing at fault (a server, a socket), or none when the
facts it needs are missing (no running instance: no backend states). Its id is stable:
the log events and `assernctl status` lines of the same problem carry it too.

To add a check: write the function beside its kin (config.py, files.py, instance.py, or
a module of its own), gather what it reads into `Facts` (gather.py), and add it to
`CHECKS`, or to `CONTRIBUTED` for a check another command owns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assern.app.ctl.doctor.checks.clients import clients_reach
from assern.app.ctl.doctor.checks.config import (
    config_no_servers,
    config_resolves,
    env_unresolved,
    server_launcher,
)
from assern.app.ctl.doctor.checks.files import home_private, run_private
from assern.app.ctl.doctor.checks.instance import (
    backend_crash_loop,
    backend_failed,
    backend_no_tools,
    daemon_answers,
    daemon_build,
    daemon_runtime,
    http_port,
)
from assern.app.ctl.doctor.checks.trust import trust_untrusted

if TYPE_CHECKING:
    from assern.app.ctl.doctor.facts import Facts
    from assern.app.ctl.doctor.finding import Check, Finding

CHECKS: tuple[Check, ...] = (
    config_resolves,
    env_unresolved,
    config_no_servers,
    server_launcher,
    home_private,
    run_private,
    daemon_answers,
    daemon_build,
    daemon_runtime,
    backend_failed,
    backend_crash_loop,
    backend_no_tools,
    http_port,
)

#: The hook for checks that other commands own, run after `CHECKS`: the client check
#: (each MCP client `assernctl clients` finds, and whether it reaches assern, bypasses it
#: or duplicates its backends) and the project trust check. Each adds the facts it reads
#: to `Facts` (filled in gather.py from its command's own function) and its check here.
CONTRIBUTED: tuple[Check, ...] = (clients_reach, trust_untrusted)


def run_checks(facts: Facts, checks: tuple[Check, ...] = CHECKS + CONTRIBUTED) -> list[Finding]:
    """Every finding of `checks` over `facts`, in order."""
    return [finding for check in checks for finding in check(facts)]
