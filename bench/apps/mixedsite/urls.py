import time

from django.http import JsonResponse
from django.urls import path


def fast(request):
    return JsonResponse({"fast": True, "path": request.path})


def slow(request):
    time.sleep(0.2)
    return JsonResponse({"slow": True})


urlpatterns = [path("fast", fast), path("slow", slow)]
