import hashlib

from django.http import JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.views.decorators.csrf import csrf_exempt

from gate import gated_chunks


def json_view(request):
    return JsonResponse(
        {
            "hello": "django",
            "method": request.method,
            "query": request.GET.dict(),
            "script_name": request.META.get("SCRIPT_NAME", ""),
            "path": request.path,
        }
    )


@csrf_exempt
def upload(request):
    upload = request.FILES["file"]
    data = upload.read()
    return JsonResponse(
        {
            "name": request.POST["name"],
            "filename": upload.name,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    )


def protected(request):
    """A POST here without a CSRF token gets Django's 403."""
    return JsonResponse({"ok": True})


def go_elsewhere(request):
    return redirect("/json/?from=redirect")


def stream(request):
    return StreamingHttpResponse(gated_chunks(request.GET["gate"]), content_type="text/plain")
