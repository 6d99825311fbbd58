"""Engines own every database statement; the runtime and the public API only talk to them."""

from conveyor.engine.base import Engine

__all__ = ["Engine"]
