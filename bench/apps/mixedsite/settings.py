"""The seed's Django mixed workload: a fast view and a 200 ms slow one (a view
waiting on a database: the GIL released while it sleeps)."""
SECRET_KEY = "bench-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "urls"
INSTALLED_APPS = ["django.contrib.contenttypes"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
DATABASES = {}
USE_TZ = True
