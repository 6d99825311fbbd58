"""The ``conveyor`` command line."""

from conveyor.cli.main import main

__all__ = ["main"]
