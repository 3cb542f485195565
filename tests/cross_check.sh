#!/usr/bin/env bash
# The targets this machine builds for but does not run, checked from Linux:
# `cargo clippy -D warnings` (which type-checks everything `cargo check`
# does) of the whole workspace and its tests, without and with the python
# feature, for x86_64-apple-darwin and aarch64-apple-darwin (the macOS
# wheels) and x86_64-unknown-linux-musl (the musllinux ones: musl's libc
# types differ from glibc's). Nothing links (Apple's SDK is not here), so
# what this proves is that every cfg path those targets take compiles clean;
# the tests themselves run on macOS in .github/workflows/ci.yml.
#
# What it needs, installed here if missing: the targets' std (rustup) and a
# C compiler for them, for the build scripts of ring and mimalloc: `zig cc`
# from PyPI's ziglang, in a virtualenv under target/, behind a wrapper that
# drops cc-rs's `--target=` (zig spells the target its own way). PyO3 is
# checked for a version with no interpreter (PYO3_CROSS_PYTHON_VERSION):
# the oldest supported CPython on Intel, the free-threaded 3.14t on arm64,
# the newest on musl.
# Usage: bash tests/cross_check.sh [PYTHON]   (PYTHON makes the venv; python3)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${1:-python3}
tools=target/cross-tools
zig_cc=$tools/zig-cc

targets=(x86_64-apple-darwin aarch64-apple-darwin x86_64-unknown-linux-musl)
installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

if [ ! -x "$tools/venv/bin/python" ] || ! "$tools/venv/bin/python" -m ziglang version >/dev/null 2>&1; then
    rm -rf "$tools/venv"
    "$python" -m venv "$tools/venv"
    "$tools/venv/bin/python" -m pip install -q ziglang==0.17.1
fi
cat >"$zig_cc" <<EOF
#!/usr/bin/env bash
# zig cc for \$ZIG_TARGET; cc-rs adds --target=<rust triple>, which zig refuses.
args=()
for a in "\$@"; do case \$a in --target=*) ;; *) args+=("\$a") ;; esac; done
exec "$PWD/$tools/venv/bin/python" -m ziglang cc -target "\$ZIG_TARGET" "\${args[@]}"
EOF
chmod +x "$zig_cc"

failed=0
# check TARGET ZIG_TARGET PYTHON_VERSION: clippy without, then with the python feature.
check() {
    local target=$1 zig=$2 pyversion=$3 cc_var
    cc_var=CC_$(tr - _ <<<"$target")
    for features in "" "--features python"; do
        echo "==> clippy $target ${features:-(no python)}${features:+ (CPython $pyversion)}"
        # shellcheck disable=SC2086
        # -crt-static on musl: a cdylib (the extension) needs musl's libc
        # linked dynamically, as maturin builds it.
        env "$cc_var=$PWD/$zig_cc" ZIG_TARGET="$zig" PYO3_CROSS_PYTHON_VERSION="$pyversion" \
            CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=-crt-static" \
            cargo clippy --workspace --all-targets --target "$target" $features -- -D warnings ||
            failed=1
    done
}
check x86_64-apple-darwin x86_64-macos 3.10
check aarch64-apple-darwin aarch64-macos 3.14t
check x86_64-unknown-linux-musl x86_64-linux-musl 3.15
exit $failed
