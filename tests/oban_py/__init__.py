"""Helpers that run under oban-py's own virtualenv (.venv-oban, Python 3.12+), never under Conveyor's.

``driver.py`` is the script tests/test_oban_compat.py starts in a subprocess; ``workers.py`` holds the
oban-py workers it runs, found by oban-py the way it finds any worker: by importing the worker name.
"""
