"""What the Kubernetes schemas do not check in deploy/kubernetes/ (tests/run.sh's
"deploy lint" step): the Deployment is in the Guaranteed QoS class with an
integer CPU count (the static CPU manager's exclusive CPUs), m0serve's CPU
plan is left to its affinity mask (no --workers, no --cores), the probes are
on the paths the flags name, the grace period outlasts the shutdown delay
and the drain, and the seccomp profile is deploy/seccomp/m0serve.json's name.
Exit 1 with one line per fault. Usage: python deploy/check_manifests.py"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent


def flag(args: list, name: str):
    """The value of --name=VALUE (or --name VALUE), None if absent."""
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def faults() -> list:
    found = []
    spec = yaml.safe_load((DEPLOY / "kubernetes" / "deployment.yaml").read_text())["spec"]["template"]["spec"]
    for c in spec["containers"]:
        requests, limits = c["resources"].get("requests", {}), c["resources"].get("limits", {})
        for what in ("cpu", "memory"):
            if what not in limits or requests.get(what, limits[what]) != limits[what]:
                found.append(f"{c['name']}: {what} requests must equal limits (the Guaranteed QoS class)")
        if not str(limits.get("cpu", "")).isdigit():
            found.append(f"{c['name']}: the CPU limit must be an integer (exclusive CPUs), not {limits.get('cpu')!r}")
        args = c.get("args", [])
        for pinned in ("workers", "cores"):
            if flag(args, pinned) is not None:
                found.append(f"{c['name']}: --{pinned} is derived from the affinity mask; do not set it")
        for probe, path_flag in (("livenessProbe", "health-path"), ("readinessProbe", "ready-path")):
            path = c.get(probe, {}).get("httpGet", {}).get("path")
            if path is None or path != flag(args, path_flag):
                found.append(f"{c['name']}: {probe} must GET --{path_flag} ({flag(args, path_flag)!r}), not {path!r}")
        delay = float(flag(args, "shutdown-delay") or 0)
        graceful = float(flag(args, "graceful-timeout") or 30)
        if spec.get("terminationGracePeriodSeconds", 30) <= delay + graceful:
            found.append(f"terminationGracePeriodSeconds must be above --shutdown-delay + --graceful-timeout ({delay + graceful:g})")
    seccomp = spec.get("securityContext", {}).get("seccompProfile", {})
    if seccomp.get("type") != "Localhost" or Path(seccomp.get("localhostProfile", "")).name != "m0serve.json":
        found.append(f"the pod's seccompProfile must be Localhost profiles/m0serve.json, not {seccomp}")
    if not (DEPLOY / "seccomp" / "m0serve.json").is_file():
        found.append("deploy/seccomp/m0serve.json is missing")
    return found


if __name__ == "__main__":
    problems = faults()
    for p in problems:
        print(f"deploy/kubernetes/deployment.yaml: {p}", file=sys.stderr)
    print(f"check_manifests: {len(problems)} fault(s)")
    sys.exit(1 if problems else 0)
