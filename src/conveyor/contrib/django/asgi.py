"""An ``asgi.py`` router for serving the dashboard beside Django under ASGI, without Django seeing it.

Most projects need none of this: ``path("jobs/", include("conveyor.contrib.django.urls"))`` serves
the dashboard through Django (staff only), under WSGI and ASGI alike. ``route_dashboard`` is for a
dashboard kept out of Django's request handling (its own auth, say). It answers ASGI's ``lifespan``
events itself, which Django's ASGI handler refuses, and closes the app's connections at shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def route_dashboard(django_app: ASGIApp, dashboard: ASGIApp, prefix: str = "/jobs") -> ASGIApp:
    """The ASGI app that sends HTTP requests below ``prefix`` to ``dashboard`` (mounted there:
    its links follow) and the rest to ``django_app``; lifespan events are answered here."""
    if not isinstance(prefix, str) or not prefix.strip("/"):
        raise ValueError(f"prefix must be a path such as '/jobs', not {prefix!r}")
    prefix = "/" + prefix.strip("/")

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == prefix or path.startswith(prefix + "/")):
            await dashboard(dict(scope, root_path=scope.get("root_path", "") + prefix), receive, send)
        else:
            await django_app(scope, receive, send)

    return application


async def _lifespan(receive: Receive, send: Send) -> None:
    from conveyor.contrib.django import get_app

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await get_app().close()  # the connections the dashboard opened on this loop
            await send({"type": "lifespan.shutdown.complete"})
            return
        else:
            return  # not a lifespan event: the server is gone
