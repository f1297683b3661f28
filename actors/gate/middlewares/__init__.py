"""The middlewares assern ships, each named by its module in `[[middleware]] use`:
"rate_limit" (rate_limit.py), "redact" (redact.py) and "audit" (audit.py)."""
