"""The shop's jobs: found by conveyor.contrib.django because the module is named ``jobs``."""

import threading

from conveyor import job
from shop.models import Order


@job(queue="shop")
def fulfil(order_id: int) -> str:
    # A blocking job using the ORM, in one of the node's threads.
    order = Order.objects.get(pk=order_id)
    order.status = "fulfilled"
    order.fulfilled_by = threading.current_thread().name
    order.save()
    return order.email
