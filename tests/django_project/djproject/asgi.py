"""The project under ASGI, with the dashboard routed beside Django (docs/guides/django.md)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djproject.settings")
django_app = get_asgi_application()  # sets Django up: get_app() works from here on

from conveyor.contrib.django import get_app  # noqa: E402
from conveyor.contrib.django.asgi import route_dashboard  # noqa: E402
from conveyor.web.dashboard import dashboard_app  # noqa: E402

# No auth configured: the dashboard answers loopback requests only (give it auth= in production).
application = route_dashboard(django_app, dashboard_app(get_app()), prefix="/ops")
