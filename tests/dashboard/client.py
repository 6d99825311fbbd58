"""Talking to a dashboard app in-process, as a browser would: cookies kept, forms posted."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from conveyor.web.dashboard.security import CSRF_COOKIE

CSRF_FIELD = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')


def csrf_of(html: str) -> str:
    found = CSRF_FIELD.search(html)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)


@asynccontextmanager
async def browser_like(
    app: Any, base_url: str = "http://127.0.0.1", **options: Any
) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=base_url, **options) as client:
        yield client


async def token_for(client: httpx.AsyncClient, path: str = "/jobs") -> str:
    """The CSRF token of the client's session (its cookie set by the first page it loads)."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    assert client.cookies.get(CSRF_COOKIE)
    return csrf_of(page.text)


async def act(client: httpx.AsyncClient, path: str, *, page: str = "/jobs", **form: Any) -> httpx.Response:
    """Post an action form the way ``page`` does, with the session's CSRF token."""
    data = {"csrf_token": await token_for(client, page), **form}
    return await client.post(path, data=data)
