from django.db import models


class Order(models.Model):
    email = models.CharField(max_length=200)
    status = models.CharField(max_length=20, default="new")
    fulfilled_by = models.CharField(max_length=200, blank=True, default="")
