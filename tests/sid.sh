#!/usr/bin/env bash
# CPython releases newer than this machine's (3.14, 3.15) for tests/run.sh's
# Python leg, from a Debian sid chroot: Debian builds them as ordinary
# packages, so debootstrap gives us both without compiling CPython.
#   bash tests/sid.sh ensure      build the chroot if missing or stale; print its path
#   bash tests/sid.sh run CMD...  run CMD inside it, as root, in the caller's directory
# The chroot lives in ${M0_SID_ROOT:-$HOME/.cache/m0serve/sid-<arch>}. It is
# built in a temporary directory and renamed into place once complete, with a
# stamp of its package list: a changed list below rebuilds it.
# `run` mounts /proc, /sys, /dev (with /dev/pts, /dev/shm), the host's /tmp,
# this repository, and RUSTUP_HOME / CARGO_HOME at the same absolute paths as
# on the host, so paths mean the same inside and out. /tmp is shared rather
# than private for that reason too: the tests' sockets and temp files, and
# e.g. a venv made in /tmp by one `run`, are visible to the next and to the
# host. Every mount is made in a private mount namespace (unshare), so none is
# seen by the host or by a concurrent `run`, and the kernel drops them all when
# CMD's last process exits, on success, failure or signal alike; there is no
# unmount step to miss. The environment is the caller's, minus variables that
# name host-only things (see `hostonly`); PATH is the chroot's plus cargo's bin.
# The host's resolv.conf, CA bundle and pip configuration are bound read-only
# over the chroot's, so DNS, a TLS-intercepting proxy's CA and pip's settings
# carry over; HTTP(S)_PROXY, PIP_* and the like pass through with the environment.
set -euo pipefail

packages=(python3.14 python3.14-venv python3.14-dev python3.15 python3.15-venv python3.15-dev
    build-essential pkg-config curl ca-certificates openssl wrk iproute2 libseccomp-dev git procps)
mirror=${M0_SID_MIRROR:-http://deb.debian.org/debian}
arch=$(dpkg --print-architecture)
root=${M0_SID_ROOT:-$HOME/.cache/m0serve/sid-$arch}
self=$(readlink -f "$0")
repo=$(git -C "$(dirname "$self")" rev-parse --show-toplevel)
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
stamp="sid ${packages[*]}"
# Variables that point at the host's interpreters, libraries or environments.
hostonly=(LD_LIBRARY_PATH LD_PRELOAD PYO3_PYTHON PYO3_CONFIG_FILE VIRTUAL_ENV PYTHONHOME
    PYTHONPATH PYTHONSTARTUP PYENV_ROOT PYENV_VERSION PYENV_SHELL PYENV_VIRTUALENV_INIT
    CONDA_PREFIX CONDA_DEFAULT_ENV PKG_CONFIG_PATH OLDPWD)

[ "$(id -u)" = 0 ] || { echo "sid.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }

# bind SRC DST [ro]: bind-mount SRC at DST inside the chroot, creating DST.
bind() {
    if [ -d "$1" ]; then
        mkdir -p "$2"
    elif [ ! -e "$2" ]; then
        mkdir -p "$(dirname "$2")" && touch "$2"
    fi
    mount --rbind "$1" "$2"
    # ro: host files the chroot's packages would otherwise rewrite.
    if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}

# __inner ROOT DIR HOSTCONF CMD...: runs in the private mount namespace made by
# enter(); mounts, then becomes CMD chrooted into ROOT, in DIR.
inner() {
    local r=$1 dir=$2 hostconf=$3 d f
    shift 3
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    if [ "$hostconf" = 1 ]; then
        # ../shared beside the checkout: the probes' app (probes/common.py).
        shared=$(readlink -f "$repo/../shared" 2>/dev/null || true)
        for d in /tmp "$repo" "$shared" "$rustup_home" "$cargo_home" ${PIP_FIND_LINKS:-}; do
            if [ -d "$d" ]; then bind "$d" "$r$d"; fi
        done
        for f in /etc/resolv.conf /etc/ssl/certs/ca-certificates.crt /etc/pip.conf \
            "$HOME/.pip/pip.conf" "$HOME/.config/pip/pip.conf"; do
            if [ -f "$f" ]; then bind "$f" "$r$f" ro; fi
        done
    fi
    local unset=() v
    for v in "${hostonly[@]}"; do unset+=(-u "$v"); done
    exec chroot "$r" /usr/bin/env -C "$dir" "${unset[@]}" \
        PATH="$cargo_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "$@"
}

# enter ROOT DIR HOSTCONF CMD...: CMD in ROOT via inner(), in a new mount
# namespace whose mounts propagate nowhere.
enter() {
    exec unshare --mount --propagation private -- bash "$self" __inner "$@"
}

# build: debootstrap into a temporary directory, install the packages, stamp
# it, and swap it in. The caller holds the lock exclusively, so no `run` is
# using the old chroot and no other build is under way.
build() {
    local tmp="$root.tmp.$$" t0 t1
    command -v debootstrap >/dev/null || apt-get install -y debootstrap >&2
    # Leftovers of interrupted builds; --one-file-system as a guard against mounts.
    rm -rf --one-file-system "$root".tmp.* "$root".old.*
    trap 'rm -rf --one-file-system "$tmp"' EXIT
    t0=$SECONDS
    debootstrap --variant=minbase sid "$tmp" "$mirror" >&2
    t1=$SECONDS
    # apt-get rather than --include: debootstrap's resolver doesn't handle
    # alternatives and virtual packages; apt's does. No host config yet: the
    # CA bundle must not be bound while ca-certificates writes its own.
    # Check-Valid-Until off: a lagging or frozen mirror serves a Release past
    # its Valid-Until date; its signature is still checked.
    (enter "$tmp" / 0 sh -c 'export DEBIAN_FRONTEND=noninteractive &&
        apt-get -o Acquire::Check-Valid-Until=false update &&
        apt-get install -y --no-install-recommends "$@" && apt-get clean' sh "${packages[@]}") >&2
    echo "sid.sh: debootstrap $((t1 - t0)) s, apt-get install $((SECONDS - t1)) s" >&2
    echo "$stamp" >"$tmp/.m0-sid-stamp"
    [ ! -e "$root" ] || mv "$root" "$root.old.$$"
    mv "$tmp" "$root"
    trap - EXIT
    rm -rf --one-file-system "$root.old.$$"
}

# ensure: build unless the stamp matches, and return holding the lock shared
# (fd 9, which CMD inherits): runs share it, and a rebuild waits for it
# exclusively, so it never swaps the chroot out under a running CMD.
ensure() {
    mkdir -p "$(dirname "$root")"
    exec 9>"$root.lock"
    flock -s 9
    # `if`, not `||`: set -e is off inside a function called from an || list.
    if [ "$(cat "$root/.m0-sid-stamp" 2>/dev/null)" != "$stamp" ]; then
        flock 9  # and again: another ensure may have built it meanwhile
        if [ "$(cat "$root/.m0-sid-stamp" 2>/dev/null)" != "$stamp" ]; then build; fi
        flock -s 9
    fi
}

case "${1:-}" in
ensure) ensure; echo "$root" ;;
run)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 run CMD..." >&2; exit 2; }
    ensure
    case "$PWD/" in
    "$repo"/* | /tmp/* | "$cargo_home"/* | "$rustup_home"/*) ;;
    *) echo "sid.sh: note: $PWD is not shared with the host; CMD runs in the chroot's own" >&2 ;;
    esac
    enter "$root" "$PWD" 1 "$@"
    ;;
__inner) shift; inner "$@" ;;
*) echo "usage: $0 ensure | run CMD..." >&2; exit 2 ;;
esac
