"""Jobs for ``cli_node.py``, in a module of their own so that ``conveyor start --import cli_jobs`` can
load them: a node finds a job's code by importing the worker name stored in its row."""

from __future__ import annotations

import time

from conveyor import job


@job(queue="images", record=True)
def make_thumbnail(path: str, size: int) -> str:
    time.sleep(0.1)  # blocking work: a plain function runs in the node's thread pool
    return f"{path.removesuffix('.jpg')}_{size}.jpg"
