#!/usr/bin/env bash
# Checks built wheels the way a user meets them: audited, then installed from
# the wheel alone and serving.
#   bash deploy/wheel_check.sh [--audit-only] WHEEL...
#   bash deploy/wheel_check.sh --runner WHEEL     where it would run, or why not
# For each Linux wheel, the audit:
# - glibc: `auditwheel show` must name the manylinux tag the file name claims,
#   and the extension's dynamic symbols are read: the GLIBC_ versions it needs
#   (printed), and no undefined, non-weak, unversioned symbol other than
#   CPython's. auditwheel checks versioned symbols only: a function the old
#   glibc lacks altogether (memfd_create is glibc 2.27's) links unversioned
#   against a glibc 2.17 sysroot, and the wheel then fails to import there,
#   since CPython loads extensions with RTLD_NOW; auditwheel still says 2.17.
# - musl: the extension may need musl's libc alone (DT_NEEDED libc.so or
#   Alpine's libc.musl-<arch>.so.1, which musl's loader maps to itself).
#   auditwheel show is printed but not heeded: off a musl system it cannot
#   find musl's version, and it whitelists Alpine's soname only, where zig
#   (like upstream musl) writes libc.so.
# Then the run (not with --audit-only):
# - glibc: a fresh virtualenv with no cargo on PATH, `pip install
#   --only-binary :all: WHEEL fastapi flask`, and `m0serve --port 0` (no
#   other flag: the interface is told from the app) on a FastAPI hello and on
#   a Flask one, fetched with curl. The startup log's backend line (and the io_uring
#   fallback's, if any) is printed. A wheel of this machine's architecture
#   runs natively, on the matching CPython from pyenv (PYENV_ROOT, else
#   ~/.pyenv) or pythonX.Y on PATH, else (3.14, 3.15) in tests/sid.sh's
#   chroot. An aarch64 wheel runs in an arm64 Debian chroot under
#   qemu-user-static (deploy/chroot.sh, cached in ~/.cache/m0serve/):
#   bookworm's CPython is 3.11, trixie's 3.13, sid's 3.14 and 3.15. qemu-user
#   has no io_uring, so there the portable backend is expected, with its log
#   line. macOS wheels run natively on macOS.
# - musl: no musl CPython is at hand (Debian has none; no Alpine mirror is
#   reachable from here), so the extension is loaded by Debian's musl
#   loader (`ld-musl-<arch>.so.1 --list`; natively, or in the arm64 chroot):
#   every symbol but CPython's must resolve.
# A wheel that cannot run here is reported as skipped, with why, and does not
# fail the check. M0_WHEEL_NO_AUDIT=1 runs without the audit. M0_WHEEL_VENV
# names the tools' virtualenv, with auditwheel (target/wheels-venv, made by
# deploy/wheels.sh); M0_WHEEL_TIMEOUT the seconds a server may take to start
# (120: pip and imports under qemu are slow).
# The run needs root for the chroots and for installing Debian's musl.
set -euo pipefail

self=$(readlink -f "$0")
# Not git: the chroots run this script too, and have none.
repo=$(dirname "$(dirname "$self")")
tools=${M0_WHEEL_VENV:-$repo/target/wheels-venv}
timeout=${M0_WHEEL_TIMEOUT:-120}
# Whatever the caller's PATH has (cargo, pyenv shims) stays out of the run.
plain_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "wheel_check: $*" >&2; }

# tags WHEEL: sets py (3.13), plat (manylinux2014_x86_64...), arch, libc.
tags() {
    local name cp
    name=$(basename "$1" .whl)
    cp=$(echo "$name" | cut -d- -f3)
    plat=$(echo "$name" | cut -d- -f5)
    py="${cp:2:1}.${cp:3}"
    case "$plat" in
    *x86_64*) arch=x86_64 ;;
    *aarch64*) arch=aarch64 ;;
    *arm64* | *universal2*) arch=arm64 ;;
    *) arch=unknown ;;
    esac
    case "$plat" in
    manylinux*) libc=gnu ;;
    musllinux*) libc=musl ;;
    macosx*) libc=macos ;;
    *) libc=unknown ;;
    esac
}

# audit WHEEL: auditwheel's verdict and the symbol check; non-zero on a problem.
audit() {
    local wheel=$1 out verdict claimed rc=0
    [ -x "$tools/bin/auditwheel" ] || { say "no $tools/bin/auditwheel: run deploy/wheels.sh first, or set M0_WHEEL_VENV"; return 1; }
    if ! out=$("$tools/bin/auditwheel" show "$wheel" 2>&1); then
        if [ "$libc" != musl ]; then echo "$out"; say "auditwheel show failed"; return 1; fi
        # A cp310 musl extension is named *-linux-gnu.so (CPython 3.10's
        # musl suffix), so auditwheel takes it for glibc's, and trips on
        # this host's libc.so, a linker script.
        out="failed: $(echo "$out" | tail -n 1)"
    fi
    # Its verdict in a line; all it said where that is not the claimed tag.
    verdict=$(echo "$out" | tr '\n' ' ' | sed -n 's/.*consistent with the following platform tag: *"\([^"]*\)".*/\1/p')
    echo "    auditwheel show: ${verdict:-${out:0:160}}"
    # The file name's most specific tag (manylinux_2_17_x86_64).
    claimed=$(echo "$plat" | tr . '\n' | grep -E '^manylinux_[0-9]+_[0-9]+_' | head -n 1 || true)
    if [ "$libc" = musl ]; then
        echo "    (auditwheel's word on a musl wheel is not heeded: see the header)"
    elif [ -z "$claimed" ] || [ "$verdict" != "$claimed" ]; then
        echo "$out" | grep -v '^$' | sed 's/^/    /'
        say "auditwheel does not confirm ${claimed:-a manylinux tag}"
        rc=1
    fi
    "$tools/bin/python" - "$wheel" "$libc" <<'EOF' || rc=1
# The extension's dynamic section and symbols, read with pyelftools
# (auditwheel's own dependency), so any architecture's ELF reads the same.
import re, sys, zipfile, io
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerSymSection

wheel, libc = zipfile.ZipFile(sys.argv[1]), sys.argv[2]
bad = 0
for name in wheel.namelist():
    if not re.search(r"\.so(\.|$)", name):
        continue
    elf = ELFFile(io.BytesIO(wheel.read(name)))
    needed = [t.needed for seg in elf.iter_segments() if seg.header.p_type == "PT_DYNAMIC"
              for t in seg.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    print(f"    {name}: needs {' '.join(needed)}")
    if libc == "musl":
        other = [n for n in needed if not re.fullmatch(r"libc\.so|libc\.musl-[a-z0-9_]+\.so\.1", n)]
        if other:
            bad = 1
            print(f"    {name}: needs more than musl's libc: {' '.join(other)}")
        continue
    dynsym = elf.get_section_by_name(".dynsym")
    versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
    need = {}  # version index -> (library, version name)
    for sec in elf.iter_sections():
        if sec.header.sh_type == "SHT_GNU_verneed":
            for verneed, auxes in sec.iter_versions():
                for aux in auxes:
                    need[aux.entry.vna_other] = (verneed.name, aux.name)
    versions, unversioned = set(), []
    for i, sym in enumerate(dynsym.iter_symbols()):
        if i == 0 or sym.entry.st_shndx != "SHN_UNDEF":
            continue
        idx = versym.get_symbol(i).entry.ndx if versym else 0
        if idx in need:
            versions.add(need[idx][1])
        elif sym.entry.st_info.bind != "STB_WEAK" and not re.match(r"_?Py", sym.name):
            unversioned.append(sym.name)

    def key(v):
        return [int(x) for x in re.findall(r"\d+", v)]

    glibc = sorted((v for v in versions if v.startswith("GLIBC_")), key=key)
    print(f"    {name}: GLIBC versions needed: {' '.join(glibc) or 'none'}"
          + (f" (highest {glibc[-1]})" if glibc else ""))
    if unversioned:
        bad = 1
        print(f"    {name}: undefined, non-weak, unversioned symbols (CPython's aside): "
              f"{' '.join(sorted(unversioned))}")
        if glibc:
            print("    these resolve only on a libc that has them: the wheel fails to import on "
                  "an older one, whatever auditwheel says (see deploy/wheels.sh's header)")
sys.exit(bad)
EOF
    return $rc
}

# python_for X.Y: a native CPython X.Y (pyenv's, else pythonX.Y on PATH but
# not a pyenv shim, which may point at no installed version), or nothing.
python_for() {
    local v=$1 p
    for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v"*/bin/python"$v"; do
        if [ -x "$p" ]; then echo "$p"; return; fi
    done
    p=$(command -v "python$v" || true)
    case "$p" in "" | */shims/*) ;; *) echo "$p" ;; esac
}

# suite_for X.Y: the Debian suite that packages CPython X.Y, or nothing.
suite_for() {
    case "$1" in
    3.11) echo bookworm ;;
    3.13) echo trixie ;;
    3.14 | 3.15) echo sid ;;
    esac
}

# packages_for SUITE: what its chroot installs (the suite's default python3,
# or sid's two newest, as tests/sid.sh installs them; musl's loader).
packages_for() {
    case "$1" in
    sid) echo "python3.14 python3.14-venv python3.15 python3.15-venv curl ca-certificates musl" ;;
    *) echo "python3 python3-venv curl ca-certificates musl" ;;
    esac
}

# runner WHEEL: sets how (native, sid, chroot, musl, skip) and what (the
# python, the suite, native for musl's loader here, or why not), after tags().
runner() {
    local host suite
    host=$(uname -m)
    [ "$host" != arm64 ] || [ "$(uname -s)" = Darwin ] || host=aarch64
    how=skip
    case "$libc" in
    musl)
        if [ "$arch" = "$host" ] && [ "$(uname -s)" = Linux ]; then
            if [ -x "/lib/ld-musl-$arch.so.1" ] || [ "$(id -u)" = 0 ]; then how=musl what=native; return; fi
            what="no /lib/ld-musl-$arch.so.1 (apt-get install musl) and not root"
        elif [ "$arch" = aarch64 ] && [ "$host" = x86_64 ] && [ "$(id -u)" = 0 ]; then
            how=musl what=bookworm
        else
            what="no musl loader for $arch here"
        fi
        return ;;
    macos)
        if [ "$(uname -s)" != Darwin ]; then what="not on macOS"; return; fi
        if [ "$arch" = "$host" ] || [[ "$plat" == *universal2* ]]; then
            what=$(python_for "$py")
            if [ -n "$what" ]; then how=native; else what="no CPython $py here"; fi
        else
            what="$arch on $host"
        fi
        return ;;
    gnu) ;;
    *) what="unknown platform $plat"; return ;;
    esac
    if [ "$arch" = "$host" ]; then
        what=$(python_for "$py")
        if [ -n "$what" ]; then how=native; return; fi
        # tests/sid.sh's chroot has 3.14 and 3.15 for this architecture.
        if [ "$(suite_for "$py")" = sid ] && [ -f "$repo/tests/sid.sh" ] && [ "$(id -u)" = 0 ]; then
            how=sid what=/usr/bin/python$py
            return
        fi
        what="no CPython $py here"
    elif [ "$arch" = aarch64 ] && [ "$host" = x86_64 ]; then
        suite=$(suite_for "$py")
        if [ -z "$suite" ]; then
            what="no arm64 Debian suite packages CPython $py (3.11: bookworm, 3.13: trixie, 3.14 and 3.15: sid)"
        elif [ "$(id -u)" != 0 ]; then
            what="the arm64 chroot needs root"
        else
            how=chroot what=$suite
        fi
    else
        what="$arch on $host"
    fi
}

# serve WHEEL PYTHON: the run itself; where the wheel's CPU is (natively, or
# in the chroot). Its directory is under /tmp, which the chroot shares.
serve() {
    local wheel=$1 python=$2 work rc=0 iface module want url body pid
    work=$(mktemp -d /tmp/m0-wheel-check.XXXXXX)
    # Cleared as it fires: a RETURN trap set in a function outlives it.
    trap 'rm -rf "$work"; trap - RETURN' RETURN
    export PATH=$work/venv/bin:$plain_path
    unset VIRTUAL_ENV PYTHONPATH PYTHONHOME
    "$python" -m venv "$work/venv"
    echo "    $("$python" -VV | head -n 1) on $(uname -m), $({ ldd --version 2>/dev/null || uname -sr; } | head -n 1)"
    # Binaries only: nothing is compiled, whatever toolchain is about.
    pip install -q --only-binary :all: "$wheel" fastapi flask
    echo "    cargo on PATH: $(command -v cargo || echo none)"
    cat >"$work/asgi_hello.py" <<'EOF'
from fastapi import FastAPI

app = FastAPI()


@app.get("/")
def hello():
    return {"hello": "asgi"}
EOF
    cat >"$work/wsgi_hello.py" <<'EOF'
from flask import Flask

app = Flask(__name__)


@app.get("/")
def hello():
    return "hello wsgi"
EOF
    for iface in asgi wsgi; do
        module=${iface}_hello
        want=$([ $iface = asgi ] && echo '{"hello":"asgi"}' || echo 'hello wsgi')
        (cd "$work" && exec m0serve --port 0 "$module:app") >"$work/$iface.log" 2>&1 &
        pid=$!
        url=
        for _ in $(seq $((timeout * 5))); do
            url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/$iface.log" | head -n 1)
            if [ -n "$url" ] || ! kill -0 $pid 2>/dev/null; then break; fi
            sleep 0.2
        done
        body=
        if [ -n "$url" ]; then body=$(curl -sS --max-time 30 "$url/" || true); fi
        # The lines that say which backend runs, and why if not io_uring.
        grep -E 'serving|listening on|io_uring|backend' "$work/$iface.log" | sed 's/\x1b\[[0-9;]*m//g; s/^/    /' || true
        if [ "$body" = "$want" ]; then
            echo "    $iface: GET / -> $body"
        else
            echo "    $iface: FAILED: GET ${url:-(no listening line)}/ -> '${body}', wanted '$want'; the log:"
            sed 's/^/      /' "$work/$iface.log"
            rc=1
        fi
        kill -TERM $pid 2>/dev/null || true
        wait $pid 2>/dev/null || true
    done
    return $rc
}

# loader WHEEL: musl's loader links the wheel's extensions, as CPython's
# dlopen would; only CPython's own symbols may be left unresolved.
loader() {
    local wheel=$1 work ld so out left rc=0
    ld=/lib/ld-musl-$(uname -m).so.1
    if [ ! -x "$ld" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends musl >&2
    fi
    work=$(mktemp -d /tmp/m0-wheel-musl.XXXXXX)
    python3 -m zipfile -e "$wheel" "$work"
    echo "    $("$ld" 2>&1 | head -n 2 | tr '\n' ' ')on $(uname -m)"
    while IFS= read -r so; do
        out=$("$ld" --list "$so" 2>&1 || true)
        left=$(echo "$out" | grep -c -E ': _?Py[A-Za-z0-9_]*: symbol not found' || true)
        if echo "$out" | grep -v -E ': _?Py[A-Za-z0-9_]*: symbol not found' | grep -q -i -E 'error|not found'; then
            echo "    ${so#"$work"/}: FAILED to link:"
            echo "$out" | grep -v -E ': _?Py[A-Za-z0-9_]*: symbol not found' | sed 's/^/      /'
            rc=1
        else
            echo "    ${so#"$work"/}: links against musl; $left CPython symbols left to the interpreter"
        fi
    done < <(find "$work" -name '*.so')
    rm -rf "$work"
    return $rc
}

# run WHEEL: serve it where its CPU is, or say why not; 0 also when skipped.
run() {
    local wheel=$1 stage rc=0
    runner "$wheel"
    if [ $how = skip ]; then say "skipped running $(basename "$wheel"): $what"; return 0; fi
    if [ $how = native ]; then serve "$(readlink -f "$wheel")" "$what"; return; fi
    if [ $how = musl ] && [ "$what" = native ]; then loader "$(readlink -f "$wheel")"; return; fi
    # A chroot shares /tmp, not necessarily the wheel's directory.
    stage=$(mktemp -d /tmp/m0-wheel-stage.XXXXXX)
    cp "$wheel" "$stage/"
    if [ $how = sid ]; then
        bash "$repo/tests/sid.sh" run bash "$self" __serve "$stage/$(basename "$wheel")" "$what" || rc=1
    else
        # In the chroot: serve, or for musl, the loader's check.
        set -- __serve "$stage/$(basename "$wheel")" "/usr/bin/python$py"
        [ $how != musl ] || set -- __loader "$stage/$(basename "$wheel")"
        M0_CHROOT_SUITE=$what M0_CHROOT_ARCH=arm64 M0_CHROOT_PACKAGES="$(packages_for "$what")" \
            bash "$repo/deploy/chroot.sh" run bash "$self" "$@" || rc=1
    fi
    rm -rf "$stage"
    return $rc
}

audit_only=no
case "${1:-}" in
--audit-only) audit_only=yes; shift ;;
# Where WHEEL would run: "native PYTHON", "sid PYTHON", "chroot SUITE",
# "musl native" or "musl SUITE" (the loader's check), or "skip: why".
--runner) tags "$2"; runner "$2"; [ $how = skip ] && echo "skip: $what" || echo "$how $what"; exit ;;
__serve) shift; serve "$@"; exit ;;
__loader) shift; loader "$@"; exit ;;
esac
[ $# -gt 0 ] || { echo "usage: $0 [--audit-only | --runner] WHEEL..." >&2; exit 2; }

failed=0
for wheel in "$@"; do
    tags "$wheel"
    echo "== $(basename "$wheel") (CPython $py, $arch, $libc)"
    if { [ "$libc" = gnu ] || [ "$libc" = musl ]; } && [ -z "${M0_WHEEL_NO_AUDIT:-}" ]; then
        audit "$wheel" || { say "audit FAILED: $(basename "$wheel")"; failed=1; }
    fi
    if [ $audit_only = no ]; then
        run "$wheel" || { say "run FAILED: $(basename "$wheel")"; failed=1; }
    fi
done
exit $failed
