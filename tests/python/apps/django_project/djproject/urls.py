from django.urls import path

from djproject import views

urlpatterns = [
    path("json/", views.json_view),
    path("upload/", views.upload),
    path("protected/", views.protected),
    path("redirect/", views.go_elsewhere),
    path("stream/", views.stream),
]
