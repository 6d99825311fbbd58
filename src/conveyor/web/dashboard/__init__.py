"""The web dashboard (``pip install 'conveyor[web]'``): see and steer jobs, queues, nodes and cron
from a browser. ``dashboard_app(app, token=...)`` is an ASGI app to mount under any prefix;
``conveyor dashboard`` serves one alone. Guide: docs/guides/dashboard.md."""

from conveyor.web.dashboard.app import dashboard_app
from conveyor.web.dashboard.security import InsecureDashboardError, check_exposure, is_loopback

__all__ = ["InsecureDashboardError", "check_exposure", "dashboard_app", "is_loopback"]
