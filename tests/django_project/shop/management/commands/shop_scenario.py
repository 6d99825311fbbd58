"""Orders and their jobs in Django's transactions; prints one line per step for the test to read."""

from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection, transaction

from conveyor.contrib.django import get_app
from shop.jobs import fulfil
from shop.models import Order


class Boom(Exception):
    pass


def jobs() -> int:
    # Read on Django's connection: in its search_path on PostgreSQL, the one table on SQLite.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM oban_jobs")
        return int(cursor.fetchone()[0])


class Command(BaseCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            order = Order.objects.create(email="ada@example.com")
            fulfil.enqueue_sync(order_id=order.pk)
        self.stdout.write(f"committed: orders={Order.objects.count()} jobs={jobs()}")

        try:
            with transaction.atomic():
                order = Order.objects.create(email="bob@example.com")
                fulfil.enqueue_sync(order_id=order.pk)
                raise Boom
        except Boom:
            pass
        self.stdout.write(f"rolled back: orders={Order.objects.count()} jobs={jobs()}")

        with transaction.atomic():
            orders = [Order.objects.create(email=f"user{n}@example.com") for n in range(300)]
            # 300 jobs: PostgreSQL writes them with COPY, on Django's own connection.
            get_app().enqueue_many_sync(fulfil.new(order_id=o.pk) for o in orders)
            transaction.set_rollback(True)
        self.stdout.write(f"bulk rolled back: orders={Order.objects.count()} jobs={jobs()}")

        with transaction.atomic():
            orders = [Order.objects.create(email=f"user{n}@example.com") for n in range(300)]
            get_app().enqueue_many_sync(fulfil.new(order_id=o.pk) for o in orders)
        self.stdout.write(f"bulk committed: orders={Order.objects.count()} jobs={jobs()}")

        # Outside any atomic block Django's connection commits each statement: so do the jobs.
        order = Order.objects.create(email="cy@example.com")
        fulfil.enqueue_sync(order_id=order.pk)
        self.stdout.write(f"autocommit: orders={Order.objects.count()} jobs={jobs()}")
