"""A small Django project using conveyor.contrib.django, on PostgreSQL or SQLite.

The environment picks the database: ``SHOP_SQLITE`` (a file path; ``SHOP_SQLITE_TEST`` the file of
Django's test database), ``SHOP_PG_SCHEMA`` (a schema of the test database that holds Django's
tables and Conveyor's) or ``SHOP_PG_DB`` (a database name, for Django's test runner); the server is
``SHOP_PG_HOST``, ``SHOP_PG_PORT`` and ``SHOP_PG_NAME`` (default: 127.0.0.1, 5432, test).
``SHOP_CONVEYOR`` (JSON) is merged into ``CONVEYOR``, so tests can try bad settings.
"""

import json
import os

SECRET_KEY = "test-only"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "conveyor.contrib.django", "shop"]
if "SHOP_SQLITE_TEST" in os.environ or os.environ.get("SHOP_PG_DB"):
    # The project's own tests (shop/tests.py) sign users in to the dashboard at /jobs/; the other
    # runs skip auth's migrations, which would slow each `migrate` down.
    INSTALLED_APPS[:0] = ["django.contrib.auth", "django.contrib.sessions"]
    MIDDLEWARE = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
    ]
    ROOT_URLCONF = "djproject.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if os.environ.get("SHOP_SQLITE"):
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SHOP_SQLITE"]}}
    if os.environ.get("SHOP_SQLITE_TEST"):  # Django's test database: a file, as Conveyor needs
        DATABASES["default"]["TEST"] = {"NAME": os.environ["SHOP_SQLITE_TEST"]}
    PREFIX = "public"
elif os.environ.get("SHOP_PG_DB"):
    # For Django's test runner: the development database is one that does not exist (whatever
    # touches it fails), the tests run in Django's test database, test_<name>.
    PREFIX = "public"
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ["SHOP_PG_DB"],
            "USER": "postgres",
            "HOST": os.environ.get("SHOP_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SHOP_PG_PORT", "5432"),
        }
    }
else:
    PREFIX = os.environ["SHOP_PG_SCHEMA"]
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("SHOP_PG_NAME", "test"),
            "USER": "postgres",
            "HOST": os.environ.get("SHOP_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SHOP_PG_PORT", "5432"),
            # Django's tables in the test's own schema, beside Conveyor's.
            "OPTIONS": {"options": f"-c search_path={PREFIX}"},
        }
    }

CONVEYOR = {
    "prefix": PREFIX,
    "queues": {"shop": 2},
    "poll_interval": 0.2,
    "stage_interval": 0.2,
    "shutdown_grace": 2.0,
    **json.loads(os.environ.get("SHOP_CONVEYOR", "{}")),
}
