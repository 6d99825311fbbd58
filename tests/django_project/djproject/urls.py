from django.urls import include, path

urlpatterns = [path("jobs/", include("conveyor.contrib.django.urls"))]
