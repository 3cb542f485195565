#!/usr/bin/env bash
# The checks CI can make of deploy/ without a registry or a cluster
# (deploy/README.md says what they do not cover): the Kubernetes manifests
# against the schemas of the oldest and newest Kubernetes this pins
# (kubernetes-validate --strict: unknown fields are errors), what the schemas
# cannot say (deploy/check_manifests.py: Guaranteed QoS, probes on the flags'
# paths, the grace period), the Dockerfile with hadolint, the YAML with
# yamllint. The tools, pinned in deploy/requirements-lint.txt, go in a
# virtualenv under target/. Usage: bash tests/deploy_lint.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
venv=target/py-deploy
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q -r deploy/requirements-lint.txt
for k8s in 1.33.0 1.37.0; do
    "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$k8s" deploy/kubernetes/*.yaml
done
"$venv/bin/python" deploy/check_manifests.py
"$venv/bin/hadolint" --failure-threshold style deploy/Dockerfile
"$venv/bin/yamllint" --strict -c deploy/.yamllint.yaml deploy/
echo "deploy lint: manifests, Dockerfile and YAML clean"
