"""What stands between a client's call and its backend: the safety rules (what may be
listed and called), argument and result validation, and confirmation by the client.
Everything is compiled once per catalog snapshot into a `Gate` on the tool's route; a
route without one is forwarded untouched on the raw lane."""
