"""A minimal Django project for the end-to-end suite: no database, production-like settings."""

SECRET_KEY = "m0serve-tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "djproject.urls"
WSGI_APPLICATION = "djproject.wsgi.application"
INSTALLED_APPS = []
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]
DATABASES = {}
USE_TZ = True
# The uploads in the tests stay in memory below this and go to a temporary file above it.
FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
