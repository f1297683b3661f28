"""The status page: what the running instance is doing, for a person, in a browser.

`assernctl web` asks the instance (the control socket's `web` command) to serve the
page; the page actor (actor.py) starts its server then, on a free port of 127.0.0.1,
and answers with a one-time sign-in address (codes.py). The page (asgi.py) renders what
`status` answers and the log's last lines on the server (render.py), so it works
without JavaScript; one small script (static/page.js) keeps it current over
server-sent events while it is open. Every request is checked first (guard.py).
"""
