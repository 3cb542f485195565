#!/usr/bin/env bash
# Release wheels and the sdist, into dist/, with maturin and zig: what PyPI
# gets, built on one Linux machine without containers, then audited and run
# (deploy/wheel_check.sh). .github/workflows/release.yml builds the same set
# on GitHub's runners for publishing; this script is for building and
# checking them locally, before a tag.
#   bash deploy/wheels.sh [TARGET...]
# TARGET is a Rust target triple; none means every target this machine can
# build: on Linux the four below, on macOS universal2-apple-darwin.
#   x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu   manylinux2014 (glibc 2.17, below)
#   x86_64-unknown-linux-musl, aarch64-unknown-linux-musl musllinux_1_2
#   universal2-apple-darwin (or x86_64-/aarch64-apple-darwin)  macOS, only on macOS:
#     the link needs Apple's SDK (notify's FSEvents watcher links CoreServices),
#     which neither zig nor a Linux machine has.
# Windows is not a target: the server is POSIX-only (fd passing, fork/exec
# workers, Unix signals, io_uring or epoll/kqueue underneath).
# Each wheel is built for every CPython in M0_WHEEL_PYTHONS; with --zig and an
# explicit --target, maturin takes an interpreter it cannot find from its
# bundled sysconfig data, so none need be installed. The sdist (maturin sdist)
# comes last, with a check that it holds the whole workspace.
#
# Environment:
#   M0_WHEEL_PYTHONS    CPython versions, space-separated (3.10 3.11 3.12 3.13 3.14 3.15,
#                       and the free-threaded 3.14t 3.15t);
#                       e.g. "3.13" while developing: each one is a fat-LTO build
#   M0_WHEEL_MANYLINUX  the glibc targets' tag: manylinux2014 (default) or manylinux_2_28
#   M0_WHEEL_STRIP      what the link strips (CARGO_PROFILE_RELEASE_STRIP): debuginfo
#                       (default) leaves the release profile's line tables (debug = 1)
#                       out of the wheels, about a quarter the size, with the symbol
#                       table kept, so backtraces still name functions; none keeps
#                       them; symbols strips the symbol table too
#   M0_WHEEL_RUN        after building: one (default: per target, one wheel that
#                       can run here), all (every wheel that can), none (audit only)
#   M0_WHEEL_OUT        where wheels go (dist)
#   M0_WHEEL_VENV       the tools' virtualenv (target/wheels-venv): maturin, ziglang,
#                       auditwheel, at the pins below; made with M0_WHEEL_TOOLS_PYTHON (python3)
#   CARGO_TARGET_DIR    target/wheels unless set: apart from the development
#                       build's target/, which these targets and flags would thrash
#   CARGO_BUILD_JOBS    as cargo reads it (e.g. 1 beside other builds)
# Logs: $CARGO_TARGET_DIR/logs/<target>.log. The exit status is non-zero if a
# requested target failed to build, or a wheel failed its audit or its run.
#
# The glibc floor: manylinux2014, glibc 2.17, as pydantic-core and Granian's
# x86_64 wheels (Granian's aarch64 ones are 2_28 only because the
# manylinux2014 cross image's GCC 4.8 cannot build ring; zig can).
# - A higher floor gains nothing at run time: io_uring is already gated by the
#   kernel, not libc (the uring backend needs Linux 5.19; every distribution
#   shipping one has glibc 2.34 or later). Old-glibc systems (RHEL/CentOS 7:
#   2.17, Amazon Linux 2: 2.26, Ubuntu 18.04: 2.27, Debian 9: 2.24) can run
#   only the portable backend, which is what a floor of 2.17 gives them: a
#   wheel instead of an sdist build that needs a Rust toolchain.
# - pip costs nothing either way: every pip that runs on CPython 3.10 reads
#   PEP 600 tags (manylinux_2_28 needs pip 20.3).
# - What the extension links is within 2.17 (deploy/wheel_check.sh prints the
#   versions: accept4 2.10, pipe2 and epoll_create1 2.9, clock_gettime 2.17;
#   std's newer calls such as getrandom, statx and pidfd_* are weak, ring
#   reads getrandom(2) through syscall()). memfd_create's wrapper is glibc
#   2.27's, so src/ipc/shared_page.rs makes the system call itself: the
#   libc crate declares the wrapper as a plain function, which against a 2.17
#   sysroot links unversioned, and the extension would then fail to import on
#   glibc older than 2.27 (CPython dlopens with RTLD_NOW) while auditwheel,
#   which reads only versioned symbols, still says manylinux_2_17.
#   wheel_check.sh fails any wheel with such a symbol.
# - The kernel still bounds what runs: memfd_create(2) is Linux 3.17's, so on
#   RHEL/CentOS 7 (3.10) the wheel installs and imports, and the supervisor's
#   shared pages fail to be made.
set -euo pipefail
# Associative arrays, and empty arrays under set -u: macOS's own bash (3.2) has neither.
if [ "${BASH_VERSINFO[0]}" -lt 4 ]; then
    echo "wheels.sh: needs bash 4 or later (macOS: brew install bash)" >&2
    exit 2
fi
cd "$(git -C "$(dirname "$(readlink -f "$0")")" rev-parse --show-toplevel)"

read -r -a pythons <<<"${M0_WHEEL_PYTHONS:-3.10 3.11 3.12 3.13 3.14 3.15 3.14t 3.15t}"
manylinux=${M0_WHEEL_MANYLINUX:-manylinux2014}
run_mode=${M0_WHEEL_RUN:-one}
strip=${M0_WHEEL_STRIP:-debuginfo}
out=${M0_WHEEL_OUT:-dist}
venv=${M0_WHEEL_VENV:-target/wheels-venv}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/wheels}
logs=$CARGO_TARGET_DIR/logs
# The versions this script was checked with; a change here remakes the venv.
tools=(maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2)
interpreters=()
for v in "${pythons[@]}"; do interpreters+=("python$v"); done
linux_targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu
    x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

case "$manylinux" in
manylinux2014 | manylinux_2_28) ;;
*) echo "wheels.sh: M0_WHEEL_MANYLINUX is manylinux2014 or manylinux_2_28, not $manylinux" >&2; exit 2 ;;
esac
case "$strip" in
none) ;;
debuginfo | symbols) export CARGO_PROFILE_RELEASE_STRIP=$strip ;;
*) echo "wheels.sh: M0_WHEEL_STRIP is debuginfo, symbols or none, not $strip" >&2; exit 2 ;;
esac
case "$run_mode" in
one | all | none) ;;
*) echo "wheels.sh: M0_WHEEL_RUN is one, all or none, not $run_mode" >&2; exit 2 ;;
esac

built=()    # "target: N wheel(s) in S s"
skipped=()  # "target: why": platforms this machine cannot build
failed=()   # "target: why": targets that should have built and did not
problems=() # checks that failed
order=()    # targets built, in order
declare -A wheels_of=()

# tools: the virtualenv with maturin, zig and auditwheel, checked to run.
tools() {
    local stamp="$venv/.m0-tools" py=${M0_WHEEL_TOOLS_PYTHON:-python3}
    if [ "$(cat "$stamp" 2>/dev/null)" != "${tools[*]}" ]; then
        rm -rf "$venv"
        "$py" -m venv "$venv"
        "$venv/bin/pip" install -q "${tools[@]}"
        echo "${tools[*]}" >"$stamp"
    fi
    export PATH=$PWD/$venv/bin:$PATH
    echo "wheels.sh: $(maturin --version), zig $(python -m ziglang version), auditwheel $(auditwheel --version | head -n 1 | cut -d' ' -f2)"
}

# rust_target T: T's standard library installed, or why not on stderr.
rust_target() {
    local dir
    dir=$(rustc --print target-libdir --target "$1" 2>/dev/null) || true
    if [ -n "$dir" ] && [ -d "$dir" ]; then return 0; fi
    if command -v rustup >/dev/null; then rustup target add "$1" >&2 && return 0; fi
    echo "no standard library for $1 (rustup target add $1)" >&2
    return 1
}

# build TARGET: its wheels into $out; recorded in built and wheels_of, or in skipped or failed.
build() {
    local t=$1 args log started why list
    args=(--release --locked --out "$out" -i "${interpreters[@]}")
    case "$t" in
    *-linux-gnu) args+=(--zig --compatibility "$manylinux" --target "$t") ;;
    *-linux-musl) args+=(--zig --compatibility musllinux_1_2 --target "$t") ;;
    *-apple-darwin)
        if [ "$(uname -s)" != Darwin ]; then
            skipped+=("$t: needs macOS (Apple's SDK: the FSEvents watcher links CoreServices)")
            return
        fi
        args+=(--target "$t") ;;
    *-windows-*) skipped+=("$t: Windows is not a target (POSIX-only server)"); return ;;
    *) failed+=("$t: not a target of this script"); return ;;
    esac
    case "$t" in
    universal2-apple-darwin) { rust_target x86_64-apple-darwin && rust_target aarch64-apple-darwin; } 2>"$logs/$t.log" ;;
    *) rust_target "$t" 2>"$logs/$t.log" ;;
    esac || { failed+=("$t: $(tail -n 1 "$logs/$t.log")"); return; }
    log=$logs/$t.log
    started=$SECONDS
    echo "==> $t: maturin build ${args[*]}"
    if maturin build "${args[@]}" >"$log" 2>&1; then
        list=$(sed -n 's/.*Built wheel.* to //p' "$log" | tr '\n' ' ')
        wheels_of[$t]=$list
        order+=("$t")
        built+=("$t: $(echo "$list" | wc -w) wheel(s) in $((SECONDS - started)) s")
    else
        # rustc's first errors, with where; maturin's own lines otherwise.
        why=$(grep -E -A1 '^error' "$log" | grep -v -e '^--$' -e '^error: could not compile' | head -n 4 | tr -s ' \n' ' ')
        [ -n "$why" ] || why=$(grep -E '💥|Caused by' "$log" | head -n 2 | tr '\n' ' ')
        failed+=("$t: the build failed after $((SECONDS - started)) s (${why:-see $log})")
    fi
    echo "    $((SECONDS - started)) s; log: $log"
}

# sdist: maturin sdist, and whether it holds what a build needs.
sdist() {
    local started=$SECONDS file tmp top need missing=()
    echo "==> sdist: maturin sdist --out $out"
    if ! maturin sdist --out "$out" >"$logs/sdist.log" 2>&1; then
        failed+=("sdist: maturin sdist failed (see $logs/sdist.log)")
        return
    fi
    file=$(sed -n 's/.*Built source distribution to //p' "$logs/sdist.log" | tail -n 1)
    tmp=$(mktemp -d)
    tar -xzf "$file" -C "$tmp"
    top=$(echo "$tmp"/*)
    # The workspace's members, its lock, the Python package and the metadata.
    for need in Cargo.toml Cargo.lock pyproject.toml README.md PKG-INFO src/lib.rs \
        proto/Cargo.toml uring/Cargo.toml pool/Cargo.toml python/m0serve/__init__.py; do
        [ -e "$top/$need" ] || missing+=("$need")
    done
    # cargo must resolve the whole workspace from the sdist alone, lock unchanged.
    if ! cargo metadata --locked --offline --format-version 1 \
        --manifest-path "$top/Cargo.toml" >/dev/null 2>>"$logs/sdist.log"; then
        missing+=("a workspace cargo resolves with --locked (see $logs/sdist.log)")
    fi
    rm -rf "$tmp"
    if [ ${#missing[@]} -gt 0 ]; then
        failed+=("sdist: $(basename "$file") lacks ${missing[*]}")
    else
        built+=("sdist: $(basename "$file") in $((SECONDS - started)) s")
    fi
}

# check: audit every Linux wheel; run one per target (or all, or none).
# wheel_check.sh says which it can run here, and where.
check() {
    local t w runner picked ranked
    for t in "${order[@]}"; do
        read -r -a ws <<<"${wheels_of[$t]}"
        [ ${#ws[@]} -gt 0 ] || continue
        bash deploy/wheel_check.sh --audit-only "${ws[@]}" || problems+=("$t (audit)")
        [ "$run_mode" != none ] || continue
        # Which to run: natively first (the newest CPython), else in the
        # cheapest chroot (bookworm before trixie before sid).
        picked=()
        ranked=$(for w in "${ws[@]}"; do
            runner=$(bash deploy/wheel_check.sh --runner "$w")
            case "$runner" in
            native* | musl\ native) echo "0 $w" ;;
            chroot\ bookworm* | musl\ bookworm) echo "1 $w" ;;
            chroot\ trixie*) echo "2 $w" ;;
            chroot\ sid* | sid*) echo "3 $w" ;;
            esac
        done | sort -k1,1n -k2,2r)
        if [ "$run_mode" = all ]; then
            read -r -a picked <<<"$(echo "$ranked" | cut -d' ' -f2 | tr '\n' ' ')"
        elif [ -n "$ranked" ]; then
            picked=("$(echo "$ranked" | head -n 1 | cut -d' ' -f2)")
        fi
        if [ ${#picked[@]} -eq 0 ]; then
            echo "==> $t: no wheel of it can run here ($(bash deploy/wheel_check.sh --runner "${ws[0]}"))"
            continue
        fi
        echo "==> $t: running ${picked[*]}"
        # Audited above already.
        M0_WHEEL_NO_AUDIT=1 bash deploy/wheel_check.sh "${picked[@]}" || problems+=("$t (run)")
    done
}

mkdir -p "$out" "$logs"
if [ $# -gt 0 ]; then
    targets=("$@")
elif [ "$(uname -s)" = Darwin ]; then
    targets=(universal2-apple-darwin)
elif [ "$(uname -s)" = Linux ]; then
    targets=("${linux_targets[@]}")
    skipped+=("universal2-apple-darwin: needs macOS (Apple's SDK: the FSEvents watcher links CoreServices)")
else
    echo "wheels.sh: builds on Linux or macOS, not $(uname -s)" >&2
    exit 2
fi
skipped+=("windows: not a target (POSIX-only server)")

started=$SECONDS
tools
for t in "${targets[@]}"; do build "$t"; done
sdist
check

echo
echo "== wheels.sh: $((SECONDS - started)) s for CPython ${pythons[*]}; glibc targets as $manylinux; strip $strip"
for line in "${built[@]}"; do echo "built        $line"; done
for t in "${order[@]}"; do
    for w in ${wheels_of[$t]}; do
        echo "             $(basename "$w")  $(du -k "$w" | cut -f1) KiB"
    done
done
for line in "${skipped[@]}"; do echo "not built    $line"; done
for line in "${failed[@]}"; do echo "FAILED       $line"; done
for line in "${problems[@]}"; do echo "FAILED check $line"; done
# What this machine cannot build (macOS on Linux, Windows) is not a failure.
[ ${#failed[@]} -eq 0 ] && [ ${#problems[@]} -eq 0 ]
