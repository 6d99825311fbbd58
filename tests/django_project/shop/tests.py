"""The shop's tests, as a Django project writes them: run by ``manage.py test`` and by pytest-django
(tests/test_django.py runs both, on PostgreSQL and SQLite). Settings: ``CONVEYOR["testing"] =
"manual"``, so jobs are stored and run by ``drain_queue_sync``."""

from django.test import TransactionTestCase

from conveyor.testing import (
    assert_enqueued_sync,
    drain_queue_sync,
    refute_enqueued_sync,
)
from shop.jobs import fulfil
from shop.models import Order


class Boom(Exception):
    pass


class DrainTests(TransactionTestCase):
    def test_jobs_run_in_the_test_database(self) -> None:
        order = Order.objects.create(email="ada@example.com")
        fulfil.enqueue_sync(order_id=order.pk)
        job = assert_enqueued_sync(worker=fulfil, args={"order_id": order.pk})
        assert job.queue == "shop"
        assert drain_queue_sync("shop")["completed"] == 1
        order.refresh_from_db()
        assert order.status == "fulfilled"
        refute_enqueued_sync(worker=fulfil)
