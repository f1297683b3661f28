"""Generic supervision on trio, with Erlang/OTP's semantics and words.

Nothing here knows of MCP or of the application built on it; the package could be
published on its own. The public surface is re-exported below; the modules behind it:

- `spec`: `SupervisorSpec` (strategy, supervisor-wide intensity), `ChildSpec` (id,
  start function, restart type, per-child `RestartPolicy`, shutdown timeout);
- `supervisor`: `open_supervisor` and the `Supervisor` it yields; `status`: the
  `ChildStatus` snapshots it publishes and the errors it gives up with;
- `exits`: how an incarnation ended (`Normal`, `Terminated`, `Crashed`, `Shutdown`);
- `intensity`: `RestartLedger` (max_restarts within restart_window) and the backoff
  arithmetic;
- `mailbox`: bounded mailboxes and one-shot replies (`open_mailbox`, `call`,
  `reply_to`, `ActorGone`); `cell`: `Cell`, a versioned snapshot its owner replaces
  whole and readers wait on;
- `trionics`: small helpers for trio's exception groups and shielded nurseries;
- `io/`: child processes (process groups, parent-death signal), line reading and
  ordered writing on pipes and sockets, structlog set up for JSON-line files.
"""

from assern.supervisor.cell import Cell as Cell
from assern.supervisor.exits import Crashed as Crashed
from assern.supervisor.exits import Normal as Normal
from assern.supervisor.exits import Shutdown as Shutdown
from assern.supervisor.exits import Terminated as Terminated
from assern.supervisor.intensity import RestartLedger as RestartLedger
from assern.supervisor.intensity import backoff_delay as backoff_delay
from assern.supervisor.intensity import backoff_total as backoff_total
from assern.supervisor.mailbox import ActorGone as ActorGone
from assern.supervisor.mailbox import Reply as Reply
from assern.supervisor.mailbox import call as call
from assern.supervisor.mailbox import new_reply as new_reply
from assern.supervisor.mailbox import open_mailbox as open_mailbox
from assern.supervisor.mailbox import reply_to as reply_to
from assern.supervisor.spec import ChildKind as ChildKind
from assern.supervisor.spec import ChildSpec as ChildSpec
from assern.supervisor.spec import ChildStart as ChildStart
from assern.supervisor.spec import Restart as Restart
from assern.supervisor.spec import RestartPolicy as RestartPolicy
from assern.supervisor.spec import Strategy as Strategy
from assern.supervisor.spec import SupervisorSpec as SupervisorSpec
from assern.supervisor.status import ChildExhausted as ChildExhausted
from assern.supervisor.status import ChildState as ChildState
from assern.supervisor.status import ChildStatus as ChildStatus
from assern.supervisor.status import SupervisorError as SupervisorError
from assern.supervisor.status import SupervisorExhausted as SupervisorExhausted
from assern.supervisor.supervisor import Supervisor as Supervisor
from assern.supervisor.supervisor import open_supervisor as open_supervisor

__all__ = [
    "ActorGone",
    "Cell",
    "ChildExhausted",
    "ChildKind",
    "ChildSpec",
    "ChildStart",
    "ChildState",
    "ChildStatus",
    "Crashed",
    "Normal",
    "Reply",
    "Restart",
    "RestartLedger",
    "RestartPolicy",
    "Shutdown",
    "Strategy",
    "Supervisor",
    "SupervisorError",
    "SupervisorExhausted",
    "SupervisorSpec",
    "Terminated",
    "backoff_delay",
    "backoff_total",
    "call",
    "new_reply",
    "open_mailbox",
    "reply_to",
]
