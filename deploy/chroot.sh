#!/usr/bin/env bash
# A cached Debian chroot of any suite and architecture, for what this machine
# lacks: another CPython, or another CPU (an arm64 chroot runs under
# qemu-user-static through binfmt_misc). deploy/wheel_check.sh runs the
# aarch64 wheels in one; it is tests/sid.sh's approach with the suite, the
# architecture, the packages and the shared directories made parameters.
#   bash deploy/chroot.sh ensure          build the chroot if missing or stale; print its path
#   bash deploy/chroot.sh run CMD...      run CMD inside it, as root, in the caller's directory
# Set by the environment:
#   M0_CHROOT_SUITE     Debian suite (bookworm)
#   M0_CHROOT_ARCH      dpkg architecture (this machine's); another one runs under qemu
#   M0_CHROOT_PACKAGES  what apt-get installs, space-separated (python3 python3-venv curl ca-certificates)
#   M0_CHROOT_ROOT      where it lives ($HOME/.cache/m0serve/chroot-<suite>-<arch>)
#   M0_CHROOT_MIRROR    the Debian mirror (http://deb.debian.org/debian)
#   M0_CHROOT_BIND      host directories shared at the same path, besides /tmp
#                       and this repository (space-separated)
#   M0_CHROOT_PATH      directories put before the chroot's own PATH (colon-separated)
# The chroot is built in a temporary directory and renamed into place once
# complete, with a stamp of its suite, architecture and package list: a
# change rebuilds it. `run` mounts /proc, /sys, /dev, the host's /tmp, this
# repository and M0_CHROOT_BIND at the same absolute paths as on the host, in
# a private mount namespace (unshare): no mount is seen by the host or by a
# concurrent `run`, and the kernel drops them all when CMD's last process
# exits, however it exits. The environment is the caller's minus variables
# that name host-only things (`hostonly`). The host's resolv.conf, CA bundle
# and pip configuration are bound read-only over the chroot's, so DNS, a
# TLS-intercepting proxy's CA and pip's settings carry over.
# A foreign architecture needs qemu-user-static and binfmt_misc: both are set
# up here (apt-get install, mount, update-binfmts --enable), which changes the
# host's kernel state: the registration outlives this script, as it must for
# every later `run`. Debian registers qemu with binfmt's F flag (the
# interpreter is opened at registration), so nothing is copied into the chroot.
set -euo pipefail

suite=${M0_CHROOT_SUITE:-bookworm}
host_arch=$(dpkg --print-architecture)
arch=${M0_CHROOT_ARCH:-$host_arch}
read -r -a packages <<<"${M0_CHROOT_PACKAGES:-python3 python3-venv curl ca-certificates}"
mirror=${M0_CHROOT_MIRROR:-http://deb.debian.org/debian}
# chroot-: tests/sid.sh keeps its sid chroot at sid-<arch> beside these.
root=${M0_CHROOT_ROOT:-$HOME/.cache/m0serve/chroot-$suite-$arch}
read -r -a binds <<<"${M0_CHROOT_BIND:-}"
self=$(readlink -f "$0")
repo=$(git -C "$(dirname "$self")" rev-parse --show-toplevel)
stamp="$suite $arch ${packages[*]}"
# Variables that point at the host's interpreters, libraries or environments.
hostonly=(LD_LIBRARY_PATH LD_PRELOAD PYO3_PYTHON PYO3_CONFIG_FILE VIRTUAL_ENV PYTHONHOME
    PYTHONPATH PYTHONSTARTUP PYENV_ROOT PYENV_VERSION PYENV_SHELL PYENV_VIRTUALENV_INIT
    CONDA_PREFIX CONDA_DEFAULT_ENV PKG_CONFIG_PATH OLDPWD)

[ "$(id -u)" = 0 ] || { echo "chroot.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }

# qemu's name for a dpkg architecture (the binfmt entry is qemu-<name>).
qemu_name() {
    case "$1" in
    arm64) echo aarch64 ;;
    armhf | armel) echo arm ;;
    ppc64el) echo ppc64le ;;
    i386) echo i386 ;;
    *) echo "$1" ;;
    esac
}

# foreign: make binaries of $arch run here, or fail saying why.
foreign() {
    local q entry
    q=$(qemu_name "$arch")
    entry=/proc/sys/fs/binfmt_misc/qemu-$q
    if ! command -v update-binfmts >/dev/null || [ ! -e "/usr/share/binfmts/qemu-$q" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            qemu-user-static binfmt-support >&2
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    fi
    [ -e "$entry" ] || update-binfmts --enable "qemu-$q" >&2
    if ! grep -qx enabled "$entry" 2>/dev/null; then
        echo "chroot.sh: binfmt_misc has no enabled qemu-$q entry: $arch binaries cannot run here" >&2
        exit 1
    fi
    # Without F the kernel would look for the interpreter inside the chroot.
    if ! grep -q '^flags:.*F' "$entry"; then
        echo "chroot.sh: qemu-$q is registered without the F flag; copy $(sed -n 's/^interpreter //p' "$entry") into the chroot" >&2
        exit 1
    fi
}

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
        for d in /tmp "$repo" "${binds[@]}" ${PIP_FIND_LINKS:-}; do
            if [ -d "$d" ]; then bind "$d" "$r$d"; fi
        done
        for f in /etc/resolv.conf /etc/ssl/certs/ca-certificates.crt /etc/pip.conf \
            "$HOME/.pip/pip.conf" "$HOME/.config/pip/pip.conf"; do
            if [ -f "$f" ]; then bind "$f" "$r$f" ro; fi
        done
    fi
    local unset=() v path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    for v in "${hostonly[@]}"; do unset+=(-u "$v"); done
    exec chroot "$r" /usr/bin/env -C "$dir" "${unset[@]}" \
        PATH="${M0_CHROOT_PATH:+$M0_CHROOT_PATH:}$path" "$@"
}

# enter ROOT DIR HOSTCONF CMD...: CMD in ROOT via inner(), in a new mount
# namespace whose mounts propagate nowhere. The configuration travels in the
# environment, hence the exports.
enter() {
    export M0_CHROOT_SUITE=$suite M0_CHROOT_ARCH=$arch M0_CHROOT_ROOT=$root
    export M0_CHROOT_PACKAGES="${packages[*]}" M0_CHROOT_BIND="${binds[*]}"
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
    if [ "$arch" = "$host_arch" ]; then
        debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >&2
    else
        # The first stage only unpacks; the second runs the target's own
        # maintainer scripts, under qemu, in the chroot.
        debootstrap --arch="$arch" --variant=minbase --foreign "$suite" "$tmp" "$mirror" >&2
        (enter "$tmp" / 0 /debootstrap/debootstrap --second-stage) >&2
    fi
    t1=$SECONDS
    # apt-get rather than --include: debootstrap's resolver doesn't handle
    # alternatives and virtual packages; apt's does. No host config yet: the
    # CA bundle must not be bound while ca-certificates writes its own.
    # Check-Valid-Until off: a lagging or frozen mirror serves a Release past
    # its Valid-Until date; its signature is still checked.
    (enter "$tmp" / 0 sh -c 'export DEBIAN_FRONTEND=noninteractive &&
        apt-get -o Acquire::Check-Valid-Until=false update &&
        apt-get install -y --no-install-recommends "$@" && apt-get clean' sh "${packages[@]}") >&2
    echo "chroot.sh: $suite/$arch: debootstrap $((t1 - t0)) s, apt-get install $((SECONDS - t1)) s" >&2
    echo "$stamp" >"$tmp/.m0-chroot-stamp"
    [ ! -e "$root" ] || mv "$root" "$root.old.$$"
    mv "$tmp" "$root"
    trap - EXIT
    rm -rf --one-file-system "$root.old.$$"
}

# ensure: build unless the stamp matches, and return holding the lock shared
# (fd 9, which CMD inherits): runs share it, and a rebuild waits for it
# exclusively, so it never swaps the chroot out under a running CMD.
ensure() {
    if [ "$arch" != "$host_arch" ]; then foreign; fi
    mkdir -p "$(dirname "$root")"
    exec 9>"$root.lock"
    flock -s 9
    # `if`, not `||`: set -e is off inside a function called from an || list.
    if [ "$(cat "$root/.m0-chroot-stamp" 2>/dev/null)" != "$stamp" ]; then
        flock 9  # and again: another ensure may have built it meanwhile
        if [ "$(cat "$root/.m0-chroot-stamp" 2>/dev/null)" != "$stamp" ]; then build; fi
        flock -s 9
    fi
}

case "${1:-}" in
ensure) ensure; echo "$root" ;;
run)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 run CMD..." >&2; exit 2; }
    ensure
    shared=no
    for d in /tmp "$repo" "${binds[@]}"; do
        case "$PWD/" in "$d"/*) shared=yes ;; esac
    done
    [ $shared = yes ] || echo "chroot.sh: note: $PWD is not shared with the host; CMD runs in the chroot's own" >&2
    enter "$root" "$PWD" 1 "$@"
    ;;
__inner) shift; inner "$@" ;;
*) echo "usage: $0 ensure | run CMD...   (configured by M0_CHROOT_*: see the header)" >&2; exit 2 ;;
esac
