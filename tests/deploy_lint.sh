#!/usr/bin/env bash
# The checks CI can make of deploy/ without a registry or a cluster
# (deploy/README.md says what they do not cover): the Kubernetes manifests
# against the schemas of the oldest and newest Kubernetes this pins
# (kubernetes-validate --strict: unknown fields are errors), what the schemas
# cannot say (deploy/check_manifests.py: Guaranteed QoS, probes on the flags'
# paths, the grace period), the Dockerfile with hadolint, the YAML with
# yamllint, the systemd units with systemd-analyze. The tools, pinned in deploy/requirements-lint.txt, go in a
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
# The systemd units, where systemd-analyze is installed (the example's
# ExecStart names a virtualenv this machine has not: that line alone is
# expected).
if command -v systemd-analyze >/dev/null; then
    found=$(systemd-analyze verify deploy/systemd/m0serve.socket deploy/systemd/m0serve.service 2>&1 \
        | grep -v 'Command /srv/myapp/.venv/bin/m0serve is not executable' || true)
    if [ -n "$found" ]; then
        echo "$found" >&2
        exit 1
    fi
    units="systemd units, "
else
    echo "!!! systemd-analyze not installed: the systemd units are not verified" >&2
    units=""
fi
echo "deploy lint: manifests, ${units}Dockerfile and YAML clean"
