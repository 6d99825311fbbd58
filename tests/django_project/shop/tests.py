"""The shop's tests, as a Django project writes them: run by ``manage.py test`` and by pytest-django
(tests/test_django.py runs both, on PostgreSQL and SQLite). Settings: ``CONVEYOR["testing"] =
"manual"``, so jobs are stored and run by ``drain_queue_sync``; ``mode("inline")`` runs them at
enqueue instead."""

from django.db import connection, transaction
from django.test import TestCase, TransactionTestCase

from conveyor.testing import (
    all_enqueued_sync,
    assert_enqueued_sync,
    drain_queue_sync,
    mode,
    process_job_sync,
    refute_enqueued_sync,
)
from shop.jobs import fulfil
from shop.models import Order


class Boom(Exception):
    pass


class DrainTests(TransactionTestCase):
    """Drained jobs run in other threads, on other connections: they see committed rows only."""

    def test_jobs_run_in_the_test_database(self) -> None:
        order = Order.objects.create(email="ada@example.com")
        fulfil.enqueue_sync(order_id=order.pk)
        job = assert_enqueued_sync(worker=fulfil, args={"order_id": order.pk})
        assert job.queue == "shop"
        assert drain_queue_sync("shop")["completed"] == 1
        order.refresh_from_db()
        assert order.status == "fulfilled"
        refute_enqueued_sync(worker=fulfil)


class InTestCaseTests(TestCase):
    """Inside the transaction a TestCase wraps each test in: nothing here is ever committed."""

    def test_assertions_see_the_jobs_of_the_tests_transaction(self) -> None:
        order = Order.objects.create(email="ada@example.com")
        with transaction.atomic():
            fulfil.enqueue_sync(order_id=order.pk)
        try:
            with transaction.atomic():
                fulfil.enqueue_sync(order_id=-1)
                raise Boom
        except Boom:
            pass
        assert_enqueued_sync(worker=fulfil, args={"order_id": order.pk})
        refute_enqueued_sync(worker=fulfil, args={"order_id": -1})  # rolled back with its block
        assert [job.args for job in all_enqueued_sync(queue="shop")] == [{"order_id": order.pk}]

    def test_process_job_sees_the_rows_of_the_test(self) -> None:
        order = Order.objects.create(email="ada@example.com")
        assert process_job_sync(fulfil.new(order_id=order.pk)) == "ada@example.com"
        order.refresh_from_db()
        assert order.status == "fulfilled"

    def test_inline_jobs_run_at_once_outside_the_applications_transactions(self) -> None:
        order = Order.objects.create(email="ada@example.com")
        with mode("inline"):
            fulfil.enqueue_sync(order_id=order.pk)  # in this thread: the order is there
        order.refresh_from_db()
        assert order.status == "fulfilled"

    def test_inline_jobs_run_on_commit_and_never_after_a_rollback(self) -> None:
        with mode("inline"), self.captureOnCommitCallbacks(execute=True), transaction.atomic():
            order = Order.objects.create(email="ada@example.com")
            fulfil.enqueue_sync(order_id=order.pk)
            order.refresh_from_db()
            assert order.status == "new"  # not before the commit
        order.refresh_from_db()
        assert order.status == "fulfilled"
        with mode("inline"), self.captureOnCommitCallbacks(execute=True) as callbacks:
            try:
                with transaction.atomic():
                    doomed = Order.objects.create(email="bob@example.com")
                    fulfil.enqueue_sync(order_id=doomed.pk)
                    raise Boom
            except Boom:
                pass
        assert callbacks == []  # the job went with the rollback


def stored_jobs() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM oban_jobs")
        return int(cursor.fetchone()[0])


class NoLeaksTests(TransactionTestCase):
    """Each test starts without jobs, whichever runs first: Django's flush empties the job table."""

    def test_one(self) -> None:
        assert stored_jobs() == 0
        fulfil.enqueue_sync(order_id=1)  # committed at once: no TestCase transaction here

    def test_two(self) -> None:
        assert stored_jobs() == 0
        fulfil.enqueue_sync(order_id=2)
