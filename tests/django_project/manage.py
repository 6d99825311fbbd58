"""The test project's manage.py (tests/test_django.py runs it in subprocesses)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djproject.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
