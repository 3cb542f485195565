#!/usr/bin/env bash
# CPython 3.14 and 3.15 for a machine that has neither: Debian's sid builds
# both, so a sid chroot (deploy/chroot.sh, cached under ~/.cache/m0serve)
# gives them without compiling CPython, with what the Python legs of
# tests/run.sh need beside them: the interpreters' headers and venv, a C
# toolchain (maturin, the seccomp helper), curl, openssl, wrk, ss, libseccomp.
# Besides /tmp and this repository, `run` shares ../shared (the probes' app)
# and the host's rustup and cargo homes at their own paths, cargo first on PATH.
#   bash tests/sid.sh ensure      build the chroot if missing or stale; print its path
#   bash tests/sid.sh run CMD...  run CMD inside it, as root, in the caller's directory
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
shared=$(readlink -f "$here/../../shared" 2>/dev/null || true)

export M0_CHROOT_SUITE=sid
unset M0_CHROOT_ARCH
export M0_CHROOT_ROOT="$HOME/.cache/m0serve/sid-$(dpkg --print-architecture)"
packages=(python3.14 python3.14-venv python3.14-dev python3.15 python3.15-venv python3.15-dev
    build-essential pkg-config curl ca-certificates openssl wrk iproute2 libseccomp-dev git procps)
export M0_CHROOT_PACKAGES="${packages[*]}"
export M0_CHROOT_BIND="$rustup_home $cargo_home ${shared:+$shared}"
export M0_CHROOT_PATH="$cargo_home/bin"
exec bash "$here/../deploy/chroot.sh" "$@"
