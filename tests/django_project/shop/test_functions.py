"""pytest-django's function style (only pytest runs these: Django's runner collects TestCase classes)."""

from typing import Any

import pytest
from django.db import transaction

from conveyor.testing import assert_enqueued_sync, drain_queue_sync, mode
from shop.jobs import fulfil
from shop.models import Order


@pytest.mark.django_db
def test_enqueued_in_the_tests_transaction() -> None:
    order = Order.objects.create(email="ada@example.com")
    fulfil.enqueue_sync(order_id=order.pk)
    assert_enqueued_sync(worker=fulfil, args={"order_id": order.pk})


@pytest.mark.django_db
def test_inline_on_commit(django_capture_on_commit_callbacks: Any) -> None:
    with mode("inline"), django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        order = Order.objects.create(email="ada@example.com")
        fulfil.enqueue_sync(order_id=order.pk)
    order.refresh_from_db()
    assert order.status == "fulfilled"


@pytest.mark.django_db(transaction=True)
def test_drained() -> None:
    order = Order.objects.create(email="ada@example.com")
    fulfil.enqueue_sync(order_id=order.pk)
    assert drain_queue_sync("shop")["completed"] == 1
    order.refresh_from_db()
    assert order.status == "fulfilled"
