"""Web integration: a ready-made nudge endpoint now; the dashboard plugs in here later."""

from conveyor.web.nudge import NudgeEndpoint

__all__ = ["NudgeEndpoint"]
