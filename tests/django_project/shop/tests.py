"""The shop's tests, as a Django project writes them: run by ``manage.py test`` and by pytest-django
(tests/test_django.py runs both, on PostgreSQL and SQLite). Settings: ``CONVEYOR["testing"] =
"manual"``, so jobs are stored and run by ``drain_queue_sync``; ``mode("inline")`` runs them at
enqueue instead."""

import re
import threading
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.http import HttpRequest
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
    """A drain claims jobs on Conveyor's own connections: they see committed jobs only."""

    def test_jobs_run_in_the_test_database(self) -> None:
        order = Order.objects.create(email="ada@example.com")
        fulfil.enqueue_sync(order_id=order.pk)
        job = assert_enqueued_sync(worker=fulfil, args={"order_id": order.pk})
        assert job.queue == "shop"
        assert drain_queue_sync("shop")["completed"] == 1
        order.refresh_from_db()
        assert order.status == "fulfilled"
        # In the test's own thread, on its connection: nothing left open in other threads.
        assert order.fulfilled_by == threading.current_thread().name
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


def signed_in(request: HttpRequest) -> bool:
    return bool(request.user.is_authenticated)


class DashboardTests(TransactionTestCase):
    """The dashboard mounted in urls.py (``path("jobs/", include("conveyor.contrib.django.urls"))``),
    through Django's test client: staff only by default."""

    def test_staff_only(self) -> None:
        assert self.client.get("/jobs/").headers["Location"] == "/accounts/login/?next=/jobs/"
        self.client.force_login(User.objects.create_user("bob"))
        assert self.client.get("/jobs/").status_code == 403
        anyone = {**settings.CONVEYOR, "dashboard": {"allow": "shop.tests.signed_in"}}
        with self.settings(CONVEYOR=anyone):  # who may in is a setting
            assert self.client.get("/jobs/").status_code == 200
        self.client.force_login(User.objects.create_user("ada", is_staff=True))
        page = self.client.get("/jobs/")
        assert page.status_code == 200 and b"Conveyor" in page.content
        assert self.client.get("/jobs/static/dashboard.css").status_code == 200

    def test_jobs_are_listed_and_cancelled(self) -> None:
        self.client.force_login(User.objects.create_user("ada", is_staff=True))
        job_id = fulfil.enqueue_sync(order_id=7)
        listed = self.client.get("/jobs/jobs", {"queue": "shop"})
        assert listed.status_code == 200 and f"/jobs/jobs/{job_id}".encode() in listed.content
        token = re.search(rb'name="csrf_token" value="([^"]+)"', listed.content)
        assert token is not None
        form = {"csrf_token": token[1].decode(), "action": "cancel", "ids": job_id, "confirmed": "yes"}
        done = self.client.post(
            "/jobs/actions/jobs", urlencode(form), content_type="application/x-www-form-urlencoded"
        )
        assert done.status_code == 303 and done.headers["Location"].startswith("/jobs/jobs"), done.content
        refute_enqueued_sync(worker=fulfil)
