"""The dashboard's URLs: ``path("jobs/", include("conveyor.contrib.django.urls"))`` in urls.py."""

from django.urls import re_path

from conveyor.contrib.django.dashboard import dashboard

app_name = "conveyor"
urlpatterns = [re_path(r"^(?P<path>.*)$", dashboard, name="dashboard")]
