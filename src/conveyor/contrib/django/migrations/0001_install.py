"""Conveyor's schema, installed (or upgraded) by ``manage.py migrate``.

A later Conveyor with a newer schema version ships another migration running the same idempotent
install, so ``migrate`` keeps the database current.
"""

from django.db import migrations

from conveyor.contrib.django.schema import install, uninstall


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(install, uninstall, elidable=False)]
