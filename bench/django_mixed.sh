#!/usr/bin/env bash
# The Django mixed workload (bench/django_mixed.py) in the bench's own virtualenv.
#   bash bench/django_mixed.sh     # ROUNDS (3), DURATION (6s)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/venv.sh
"$venv/bin/python" bench/django_mixed.py "$venv/bin"
