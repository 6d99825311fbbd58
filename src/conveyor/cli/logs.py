"""How ``conveyor start`` sets up logging: the one place Conveyor configures logging at all."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from conveyor.log_formats import TEXT_FORMAT, JsonFormatter


def configure_logging(level: str, log_format: str, stream: TextIO | None = None) -> bool:
    """Log at ``level`` to standard error (or ``stream``) as ``"text"`` or ``"json"`` lines.

    A program that configured logging already (``conveyor start --app`` imports your module, which
    may) keeps its own setup: nothing is changed and False is returned.
    """
    root = logging.getLogger()
    if root.handlers:
        return False
    # What the lines do not show is not gathered for every record (the "Optimization" advice of
    # Python's logging HOWTO): the caller's frame, thread, process. A job line costs half as much.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    return True
