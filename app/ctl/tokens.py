"""`assernctl token create|list|revoke`: the HTTP front's bearer tokens.

The token file is the configuration's `[listen] tokens_file` (default
`$ASSERN_HOME/tokens.toml`); it holds hashes only, so `create` prints the token once
and it cannot be shown again. A running front sees changes with its next request.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from assern.actors.listener.http.tokens import TokenError, TokenStore
from assern.app.ctl.common import Usage, load_config, print_json
from assern.app.ctl.render import table

if TYPE_CHECKING:
    import argparse


def cmd_token(args: argparse.Namespace) -> int:
    config, _ = load_config(args)
    store = TokenStore(config.listen.tokens_file)
    try:
        if args.action == "create":
            if not args.name:
                raise Usage("token create needs a NAME")
            token = store.create(args.name)
            if args.json:
                print_json({"name": args.name, "token": token, "file": str(store.path)})
            else:
                print(token)
                print(
                    f"assernctl: token {args.name!r} created; only its hash is kept in {store.path}, "
                    "so copy it now (clients send it as 'Authorization: Bearer TOKEN')",
                    file=sys.stderr,
                )
            return 0
        if args.action == "revoke":
            if not args.name:
                raise Usage("token revoke needs a NAME")
            if not store.revoke(args.name):
                print(f"assernctl: no token named {args.name!r} in {store.path}", file=sys.stderr)
                return 1
            if args.json:
                print_json({"name": args.name, "revoked": True})
            else:
                print(f"token {args.name!r} revoked")
            return 0
        tokens = store.tokens()
    except TokenError as exc:
        print(f"assernctl: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json([{"name": t.name, "created": t.created, "starts": t.shown} for t in tokens.values()])
    elif not tokens:
        print(f"no tokens in {store.path} (create one with `assernctl token create NAME`)")
    else:
        rows = [[t.name, t.created, t.shown + "…"] for t in tokens.values()]
        print("\n".join(table(rows, ["NAME", "CREATED", "STARTS WITH"])))
    return 0
