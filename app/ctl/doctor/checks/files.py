"""The folders and files checks: the socket folder and its sockets are ours and private
(docs/operations.md, "Instance sharing"), and nobody else may change what assern runs."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from assern.app.ctl.doctor.finding import Finding, fail, ok, warn

if TYPE_CHECKING:
    from assern.app.ctl.doctor.facts import Facts, PathFact

RUN = "run.private"
HOME = "home.private"

#: Permission bits that let others write.
OTHERS_WRITE = 0o022
#: Permission bits that give others any access.
OTHERS_ANY = 0o077
#: The group's permission bits.
GROUP = 0o070


def others(fact: PathFact, own_group: int | None) -> int:
    """`fact`'s permission bits that give someone else access: its group's bits count
    unless the group is ours alone."""
    mode = fact.mode or 0
    return mode & ~GROUP if own_group is not None and fact.gid == own_group else mode


def _q(fact: PathFact) -> str:
    return shlex.quote(str(fact.path))


def _unreadable(check: str, fact: PathFact) -> Finding:
    return warn(check, f"cannot look at {fact.path}: {fact.error}", f"ls -ld {_q(fact)}")


def _run_entry(fact: PathFact, uid: int) -> Finding | None:
    """What is wrong with the socket folder or one thing in it (None: nothing)."""
    if fact.kind == "unreadable":
        return _unreadable(RUN, fact)
    if fact.kind == "missing":
        return None
    if fact.kind == "link":
        return fail(RUN, f"{fact.path} is a symlink; sockets are never reached through one", f"rm {_q(fact)}")
    if fact.kind not in ("folder", "file", "socket"):
        return fail(RUN, f"{fact.path} is neither a folder, a file nor a socket", f"rm {_q(fact)}")
    if fact.uid != uid:
        fix = f'sudo chown -R "$(id -un)" {_q(fact)}' if fact.kind == "folder" else f"rm -f {_q(fact)}"
        return fail(RUN, f"{fact.path} belongs to uid {fact.uid}, not to you (uid {uid})", fix)
    mode = fact.mode or 0
    if fact.kind == "folder" and mode != 0o700:
        summary = f"{fact.path} is {mode:04o}, not 0700 (the next start tightens it)"
        return warn(RUN, summary, f"chmod 700 {_q(fact)}")
    if fact.kind != "folder" and mode & OTHERS_ANY:
        return warn(RUN, f"{fact.path} is {mode:04o}, not 0600", f"chmod 600 {_q(fact)}")
    return None


def run_private(facts: Facts) -> list[Finding]:
    """`run.private`: the socket folder is a real folder of ours, 0700, and every socket,
    lock and hint in it is ours and 0600."""
    if facts.run_dir_error is not None:
        return [fail(RUN, facts.run_dir_error, "export ASSERN_HOME=$HOME/.assern")]
    if facts.run_dir is None:
        return []
    found = [finding for fact in facts.run_paths if (finding := _run_entry(fact, facts.uid)) is not None]
    if found:
        return found
    if not any(fact.path == facts.run_dir and fact.kind == "folder" for fact in facts.run_paths):
        return [ok(RUN, f"{facts.run_dir} does not exist yet; the first start creates it (0700)")]
    inside = sum(1 for fact in facts.run_paths if fact.kind in ("file", "socket"))
    return [ok(RUN, f"{facts.run_dir}: yours, 0700; {inside} socket(s), lock(s) and hint(s), all 0600")]


def _home_entry(fact: PathFact, facts: Facts, *, first: bool) -> Finding | None:
    if fact.kind == "unreadable":
        return _unreadable(HOME, fact)
    if fact.kind == "missing":
        return None
    mode, granted = fact.mode or 0, others(fact, facts.own_group)
    if first and fact.uid != facts.uid:
        summary = f"{fact.path} belongs to uid {fact.uid}, not to you (uid {facts.uid})"
        return fail(HOME, summary, f'sudo chown -R "$(id -un)" {_q(fact)}')
    if granted & OTHERS_WRITE:
        summary = f"{fact.path} is {mode:04o}: others may change what assern runs"
        return fail(HOME, summary, f"chmod go-w {_q(fact)}")
    if fact.path.name == ".env" and granted & OTHERS_ANY:
        return warn(HOME, f"{fact.path} is {mode:04o}: others may read its secrets", f"chmod 600 {_q(fact)}")
    return None


def home_private(facts: Facts) -> list[Finding]:
    """`home.private`: `$ASSERN_HOME` is ours and nobody else may write it, nor any
    configuration or .env file in effect; the .env files are readable by us alone. The
    group's bits count unless the group is ours alone (`Facts.own_group`)."""
    if not facts.home_paths:
        return []
    found = [
        finding
        for index, fact in enumerate(facts.home_paths)
        if (finding := _home_entry(fact, facts, first=index == 0)) is not None
    ]
    if found:
        return found
    home = facts.home_paths[0]
    if home.kind == "missing":
        return [ok(HOME, f"{home.path} does not exist yet; the first start creates it")]
    files = len(facts.home_paths) - 1
    return [ok(HOME, f"{home.path} and {files} configuration file(s): yours, not writable by others")]
