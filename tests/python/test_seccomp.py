"""The container fallback, under real seccomp filters (issue 12, point 2).

Docker's and containerd's default profiles refuse the io_uring syscalls with
EPERM. tests/seccomp/seccomp_exec.c (compiled here, linked with libseccomp)
loads a filter and execs m0serve under it, as a container runtime does:

- a filter refusing only io_uring_setup/enter/register with EPERM: `--backend
  auto` logs its one line and serves on the portable backend; `--uring`
  exits 1 naming the cause;
- a filter built from deploy/seccomp/m0serve.json (the runtimes' default
  profile plus io_uring; every other syscall refused, as the runtime would):
  `--uring` serves a Python app;
- the negative arm: the same profile without its io_uring entry makes
  `--uring` exit 1, so the entry is what lets io_uring through.

Without a C compiler or libseccomp's headers (Debian's libseccomp-dev) the
tests skip, saying so; in CI (CI=true, where .ci/run installs them) they fail.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, List, Optional

import pytest

from conftest import backends

pytestmark = pytest.mark.skipif(platform.system() != "Linux", reason="seccomp is Linux's")
from helpers import APPS, Server, child_env, m0serve_command, stop_cleanly

ROOT = Path(__file__).resolve().parents[2]
HELPER_SOURCE = ROOT / "tests" / "seccomp" / "seccomp_exec.c"
PROFILE = ROOT / "deploy" / "seccomp" / "m0serve.json"
URING_SYSCALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")
EPERM = 1

# Docker's names for this machine's architecture (the profile's includes/excludes "arches").
ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
# The profile's ops, as the helper spells them.
OPS = {
    "SCMP_CMP_NE": "ne",
    "SCMP_CMP_LT": "lt",
    "SCMP_CMP_LE": "le",
    "SCMP_CMP_EQ": "eq",
    "SCMP_CMP_GE": "ge",
    "SCMP_CMP_GT": "gt",
    "SCMP_CMP_MASKED_EQ": "masked_eq",
}


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/seccomp/seccomp_exec.c, compiled."""
    cc = shutil.which("cc") or shutil.which("gcc")
    built = tmp_path_factory.mktemp("seccomp") / "seccomp_exec"
    why = None
    if cc is None:
        why = "no C compiler"
    else:
        done = subprocess.run(
            [cc, "-O", "-Wall", "-o", str(built), str(HELPER_SOURCE), "-lseccomp"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            why = f"cannot build the helper against libseccomp (apt-get install libseccomp-dev): {done.stderr.strip()}"
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; .ci/run installs it, so CI must run these tests")
        pytest.skip(why)
    return built


@pytest.fixture
def uring_here(request: pytest.FixtureRequest) -> None:
    """The arms that need io_uring to work outside the filter: skipped where
    the machine itself refuses it (tests/run.sh then tests portable only)."""
    if "uring" not in backends(request.config):
        pytest.skip("io_uring is not tested here (the backends under test exclude uring)")


def kernel_at_least(version: str) -> bool:
    def numbers(s: str) -> List[int]:
        return [int(part) for part in s.split("-")[0].split(".")[:2] if part.isdigit()]

    return numbers(platform.release()) >= numbers(version)


def profile_rules(profile: dict, caps: Iterable[str] = ()) -> List[str]:
    """The helper's rules for a Docker-format profile on this architecture, for a
    process holding `caps` (none: the Deployment drops them all): each entry's
    includes/excludes (arches, caps, minKernel) decided as the runtime does,
    its action and argument conditions kept."""
    arch = ARCHES.get(platform.machine(), platform.machine())
    held = set(caps)
    default = profile["defaultAction"]
    assert default == "SCMP_ACT_ERRNO", default
    lines = [f"default errno {profile.get('defaultErrnoRet', EPERM)}"]
    for entry in profile["syscalls"]:
        includes, excludes = entry.get("includes", {}), entry.get("excludes", {})
        if includes.get("arches") and arch not in includes["arches"]:
            continue
        if any(cap not in held for cap in includes.get("caps", [])):
            continue
        if "minKernel" in includes and not kernel_at_least(includes["minKernel"]):
            continue
        if arch in excludes.get("arches", []) or held & set(excludes.get("caps", [])):
            continue
        if entry["action"] == "SCMP_ACT_ALLOW":
            action = "allow"
        elif entry["action"] == "SCMP_ACT_ERRNO":
            action = f"errno {entry.get('errnoRet', EPERM)}"
        else:
            raise AssertionError(f"an action the helper does not take: {entry}")
        conds = [
            f"{a['index']}:{OPS[a['op']]}:{a['value']}:{a.get('valueTwo', 0)}" for a in entry.get("args") or []
        ]
        lines += [" ".join([action, name] + conds) for name in entry["names"]]
    return lines


def without_uring(profile: dict) -> dict:
    """The profile with the io_uring syscalls taken out of every entry (the runtimes' own default)."""
    stripped = json.loads(json.dumps(profile))
    for entry in stripped["syscalls"]:
        entry["names"] = [n for n in entry["names"] if n not in URING_SYSCALLS]
    return stripped


def write_rules(tmp_path: Path, lines: List[str]) -> Path:
    path = tmp_path / "rules"
    path.write_text("\n".join(lines) + "\n")
    return path


def serve_under(helper: Path, rules: Path, *flags: str, app: str = "plain:hello") -> Server:
    argv = [str(helper), str(rules), "--"] + m0serve_command()
    argv += ["--port=0", "--cores=1", "--health-path=/healthz", "--graceful-timeout=5", f"--app-dir={APPS}"]
    return Server(argv + list(flags) + [app], None, child_env())


def run_under(helper: Path, rules: Path, *flags: str) -> subprocess.CompletedProcess:
    argv = [str(helper), str(rules), "--"] + m0serve_command()
    argv += ["--port=0", "--cores=1", f"--app-dir={APPS}"] + list(flags) + ["plain:hello"]
    try:
        return subprocess.run(argv, env=child_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{argv} did not exit within 30s (it should have refused to start): {e.stderr}")


def get(server: Server, target: str) -> bytes:
    return server.exchange(f"GET {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())


def refusing_uring(tmp_path: Path) -> Path:
    """What Docker's and containerd's default profiles do to io_uring, and nothing else."""
    return write_rules(tmp_path, ["default allow"] + [f"errno {EPERM} {name}" for name in URING_SYSCALLS])


def assert_served_by_app(server: Server) -> None:
    reply = get(server, "/x")
    assert reply.startswith(b"HTTP/1.1 200 "), reply
    assert reply.endswith(b"hello from /x"), reply


def test_auto_falls_back_to_portable_with_one_line_under_a_filter_refusing_io_uring(helper: Path, tmp_path: Path) -> None:
    server = serve_under(helper, refusing_uring(tmp_path), "--backend=auto")
    try:
        assert "(portable backend" in server.wait_for("listening on").string
        assert_served_by_app(server)
        fallback = [line for line in server.output.splitlines() if "io_uring is not available" in line]
        assert len(fallback) == 1, server.output
        assert "EPERM" in fallback[0], fallback
    finally:
        stop_cleanly(server)


def test_auto_falls_back_with_one_line_for_all_workers(helper: Path, tmp_path: Path) -> None:
    """The supervisor decides once: its workers run portable without probing
    and logging again (two workers, one line)."""
    server = serve_under(helper, refusing_uring(tmp_path), "--backend=auto", "--workers=2")
    try:
        server.wait_for(r"supervisor .*: 2 worker\(s\) ready", 20)
        listening = [line for line in server.output.splitlines() if "listening on" in line]
        assert len(listening) == 2 and all("(portable backend" in line for line in listening), server.output
        assert_served_by_app(server)
        fallback = [line for line in server.output.splitlines() if "io_uring is not available" in line]
        assert len(fallback) == 1, server.output
    finally:
        stop_cleanly(server)


def test_uring_exits_1_naming_eperm_under_a_filter_refusing_io_uring(helper: Path, tmp_path: Path) -> None:
    done = run_under(helper, refusing_uring(tmp_path), "--uring")
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "io_uring is not available" in done.stderr and "EPERM" in done.stderr, done.stderr
    assert "listening on" not in done.stdout + done.stderr


def test_uring_serves_under_the_deploy_profile(helper: Path, tmp_path: Path, uring_here: None) -> None:
    rules = write_rules(tmp_path, profile_rules(json.loads(PROFILE.read_text())))
    server = serve_under(helper, rules, "--uring")
    try:
        assert "(uring backend" in server.wait_for("listening on").string
        assert_served_by_app(server)
        assert b"200" in get(server, "/healthz").split(b"\r\n")[0]
    finally:
        stop_cleanly(server)


def test_uring_exits_1_under_the_deploy_profile_without_its_io_uring_entry(
    helper: Path, tmp_path: Path, uring_here: None
) -> None:
    """The negative arm: the runtimes' default profile alone refuses io_uring
    (its default action, EPERM), so the profile's addition is what matters,
    and the rest of the filter is not what lets m0serve serve."""
    profile = json.loads(PROFILE.read_text())
    stripped = without_uring(profile)
    assert stripped != profile, "the deploy profile must allow the io_uring syscalls"
    rules = write_rules(tmp_path, profile_rules(stripped))
    done = run_under(helper, rules, "--uring")
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "io_uring is not available" in done.stderr and "EPERM" in done.stderr, done.stderr
    # And auto, under the runtimes' own default, serves on portable.
    server = serve_under(helper, rules, "--backend=auto")
    try:
        assert "(portable backend" in server.wait_for("listening on").string
        assert_served_by_app(server)
    finally:
        stop_cleanly(server)


def test_the_deploy_profile_is_the_default_profile_plus_io_uring() -> None:
    """deploy/seccomp/m0serve.json refuses by default (as the runtimes do) and
    its only io_uring entry is an unconditional allow."""
    profile = json.loads(PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO" and profile.get("defaultErrnoRet") == EPERM
    entries = [e for e in profile["syscalls"] if set(e["names"]) & set(URING_SYSCALLS)]
    assert len(entries) == 1 and sorted(entries[0]["names"]) == sorted(URING_SYSCALLS), entries
    only: Optional[dict] = entries[0]
    assert only["action"] == "SCMP_ACT_ALLOW" and not only.get("args") and not only.get("includes"), only
