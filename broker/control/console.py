"""The live web console (issue 18): static files served beside the control API, on the same host and port.

The console is plain HTML, CSS and ES modules in ``broker/control/console/`` (shipped as package data), with no
third-party code and no build step, so it works offline. It reads only the control API (the groups, their
events, the ``/v1/events`` stream) and acts through the same routes the CLI calls. Only the files listed in
``FILES`` are served: the file name is looked up, never joined to a path, so no request can reach another file.
The Content-Security-Policy allows nothing but this origin: no inline script or style, no other host.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from broker.control.http_guard import json_error

# Every file the console has, with its type; anything else under /console/ is a 404.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "groups.js": "text/javascript; charset=utf-8",
    "group.js": "text/javascript; charset=utf-8",
    "timeline.js": "text/javascript; charset=utf-8",
    "history.js": "text/javascript; charset=utf-8",
    "actions.js": "text/javascript; charset=utf-8",
    "share.js": "text/javascript; charset=utf-8",
    "nodes.js": "text/javascript; charset=utf-8",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _read(name: str) -> bytes:
    """A console file's bytes, read from the installed package each time: small, and edits show on reload."""
    return resources.files("broker.control").joinpath("console", name).read_bytes()


def _file(name: str) -> web.Response:
    response = web.Response(body=_read(name), headers=HEADERS)
    response.headers["Content-Type"] = FILES[name]
    return response


async def index(request: web.Request) -> web.Response:
    """``/`` and ``/groups/{group}``: the one page; the script reads the path (or the ``#/groups/<id>`` hash)."""
    return _file("index.html")


async def asset(request: web.Request) -> web.Response:
    name = request.match_info["file"]
    if name not in FILES:  # a lookup, not a path join: "../app.py" or "%2e%2e" is just an unknown name
        return json_error(404, f"no such console file: {name!r}")
    return _file(name)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/", index),
        web.get("/groups/{group}", index),
        web.get("/console/{file}", asset),
    ]
