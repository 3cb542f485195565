#!/usr/bin/env bash
# The test command: build, the whole workspace's tests on the io_uring backend,
# the end-to-end suites again on the portable backend, the library's tests with
# the python feature, the macOS and musl targets linted (tests/cross_check.sh), then
# the Python legs (below): a virtualenv each with tests/python/requirements.txt
# and m0serve, and the pytest suite (two xdist workers, then the `serial`
# tests alone); the Autobahn|Testsuite WebSocket fuzzer (tests/autobahn.sh)
# on both backends, against an ASGI echo app served by the newest leg's
# m0serve; the probes on that same release build; the fuzz corpus replayed
# and each AFL++ fuzz target run for FUZZ_SECONDS (default 45), one per CPU
# at a time (fuzz/); deploy/'s manifests, Dockerfile and YAML linted
# (tests/deploy_lint.sh); then clippy (with and without the python feature,
# and of fuzz/) and rustfmt.
# Every step runs even if an earlier one failed; the exit status is non-zero if
# any failed. Each step's wall time is printed after the summary.
# Usage: bash tests/run.sh
#
# The Python legs, each on the CPython found through pyenv (or /root/.pyenv),
# else as pythonX.Y on PATH, else (3.14, 3.15: Debian builds them, this
# machine's Debian does not) in a Debian sid chroot (tests/sid.sh, cached
# under ~/.cache/m0serve; its builds in target/sid, apart from the host's):
# - 3.10, the oldest: cargo's dev profile (MATURIN_PEP517_ARGS, overridable),
#   quicker to build, with its debug assertions on under the suite; the first
#   backend only (the backends are Rust and do not vary with the interpreter).
# - 3.15, the newest: the release wheel users install, built by
#   deploy/wheels.sh (manylinux2014, zig, fat LTO) and audited, installed
#   from the wheel; the whole suite on both backends; the quick start served
#   from a fresh virtualenv with no cargo on PATH (deploy/wheel_check.sh);
#   Autobahn and the probes run on this build (their timing ratios assume the
#   release profile). Off Linux, `pip install .` in the release profile.
# - 3.14: the dev profile, a smoke subset (both interfaces and the frameworks,
#   the Python API, WebSocket, the probes' app) on the first backend.
#
# M0_REQUIRE_URING=1 makes a kernel that refuses io_uring a failure; otherwise
# (a container whose seccomp profile blocks it, say) the io_uring leg is
# skipped with a loud note and the workspace tests run on the portable backend.
set -uo pipefail
cd "$(dirname "$0")/.."

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()
summary=()
timings=()

# step NAME CMD...: run CMD, keep its output, record its outcome.
step() {
    local name=$1
    shift
    echo "==> $name: $*"
    local log="$logs/$(echo "$name" | tr -c 'a-zA-Z0-9' _).log" started=$SECONDS
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    # The test runners' summary lines, prefixed by the step.
    while IFS= read -r line; do
        summary+=("$name: $line")
    done < <(awk '
        /^ *Running /   { crate = $NF; sub(/.*\//, "", crate); sub(/-[0-9a-f]+\)$/, "", crate)
                          suite = ($2 == "unittests") ? crate " " $3 : $2 }
        /^ *Doc-tests / { suite = "doc-tests " $2 }
        /^(pool-fairness|accept-batch|slow-client)/ { print $0 }
        /^fuzz [a-z0-9_]+: [0-9]+ execs/ { print $0 }
        /^ktls guest: ([0-9]+ passed|not run)/ { print $0 }
        /^[0-9]+ passed, [0-9]+ failed$/ { print "cases: " $0 }
        /^test result:/ { sub(/^test result: /, ""); print suite ": " $0 }
        /^thread .* panicked at / { print $0; if ((getline msg) > 0) print "  " msg }
        /^=* *[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)/ && / in [0-9.]+s/ {
                          gsub(/=/, ""); sub(/^ +/, ""); sub(/ +$/, ""); print $0 }' "$log")
    timings+=("$(printf '%5d s  %s' $((SECONDS - started)) "$name")")
    if [ "$rc" -ne 0 ]; then
        failed+=("$name (exit $rc)")
    fi
    return "$rc"
}

# Whether the built binary can run the io_uring backend here: 0 yes, 1 it
# says io_uring is refused, 2 it failed for some other reason (then the io_uring
# leg runs, and fails where it should).
uring_works() {
    local out=$logs/uring-probe.out
    target/debug/m0serve --uring --port 0 --cores 1 >"$out" 2>&1 &
    local pid=$! i
    for i in $(seq 100); do
        if grep -q 'listening on' "$out"; then
            kill -TERM "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            cat "$out"
            grep -q 'io_uring' "$out" && return 1
            return 2
        fi
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    cat "$out"
    return 2
}

# find_python X.Y: the newest CPython X.Y.* under pyenv, else pythonX.Y on PATH.
find_python() {
    local want=$1 root p found=""
    root=$(pyenv root 2>/dev/null || echo /root/.pyenv)
    for p in "$root"/versions/"$want".*/bin/python"$want" /root/.pyenv/versions/"$want".*/bin/python"$want"; do
        [ -x "$p" ] && found=$p
    done
    if [ -z "$found" ]; then
        found=$(command -v "python$want" 2>/dev/null) || return 1
    fi
    echo "$found"
}

# The smoke leg's files.
SMOKE=(tests/python/test_interface.py tests/python/test_api.py
    tests/python/test_asgi_websocket.py tests/python/test_probe_app.py)

# python_leg VERSION MODE BACKENDS: MODE is dev, wheel (the newest) or smoke
# (see the header). A virtualenv target/py-VERSION, m0serve installed as
# MODE says, the pytest suite (or the smoke subset) on BACKENDS.
python_leg() {
    local version=$1 mode=$2 backends=$3 venv=target/py-$1 python run=() name=$1
    if python=$(find_python "$version"); then
        :
    elif [ "$(uname -s)" = Linux ] && step "sid chroot ($version)" bash tests/sid.sh ensure; then
        # Its own target dir: artifacts built against sid's glibc must not
        # be taken up by the host's builds.
        run=(bash tests/sid.sh run env CARGO_TARGET_DIR=target/sid)
        python=python$version
        name="$version, sid"
    else
        failed+=("CPython $version: not found (pyenv, python$version), and no Debian chroot to make it")
        return
    fi
    step "venv ($name)" "${run[@]}" "$python" -m venv --clear "$venv" || return
    step "pip install ($name)" "${run[@]}" "$venv/bin/python" -m pip install -q -r tests/python/requirements.txt || return
    [ "$mode" = wheel ] && [ "$(uname -s)" != Linux ] && mode=release
    case $mode in
    wheel)
        local triple wheel
        triple=$(rustc -vV | sed -n 's/^host: //p')
        # The release build users get: a manylinux wheel, audited
        # (auditwheel, and the glibc symbols it cannot see); run below.
        M0_WHEEL_PYTHONS=$version M0_WHEEL_RUN=none \
            step "wheel (cp${version/./}, $triple)" bash deploy/wheels.sh "$triple" || return
        wheel=$(ls dist/m0serve-*-cp"${version/./}"-cp"${version/./}"-*"${triple%%-*}".whl 2>/dev/null | head -1)
        [ -n "$wheel" ] || { failed+=("no cp${version/./} wheel in dist/"); return; }
        step "pip install wheel ($name)" "${run[@]}" "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel" || return
        step "wheel quick start ($name)" env M0_WHEEL_NO_AUDIT=1 bash deploy/wheel_check.sh "$wheel"
        ;;
    release | dev | smoke)
        local profile=$maturin_args
        [ "$mode" = release ] && profile=""
        # --force-reinstall: the version does not change between commits, the code does.
        # maturin builds for the venv's interpreter, not the PYO3_PYTHON of the cargo steps.
        MATURIN_PEP517_ARGS=$profile step "pip install . ($name${profile:+, $profile})" \
            env -u PYO3_PYTHON "${run[@]}" "$venv/bin/python" -m pip install -q --force-reinstall --no-deps . || return
        ;;
    esac
    local pytest=("${run[@]}" "$venv/bin/python" -m pytest -q -p no:cacheprovider)
    if [ "$mode" = smoke ]; then
        M0_TEST_BACKENDS=${backends%%,*} step "pytest ($name, smoke)" "${pytest[@]}" "${SMOKE[@]}" \
            -n 2 --junitxml="target/pytest-$version.xml"
        return
    fi
    # Two pytest-xdist workers (the suite mostly waits on servers, so this
    # halves its time on CI's two CPUs), then the tests marked `serial` alone:
    # they assert a latency bound or a CPU share (tests/python/conftest.py).
    M0_TEST_BACKENDS=$backends step "pytest ($name, $backends)" "${pytest[@]}" tests/python \
        -n 2 --dist loadgroup -m "not serial" --junitxml="target/pytest-$version.xml"
    M0_TEST_BACKENDS=$backends step "pytest ($name, $backends, serial)" "${pytest[@]}" tests/python \
        -m serial --junitxml="target/pytest-$version-serial.xml"
    if [ "$mode" = wheel ] || [ "$mode" = release ]; then
        release_venv=$venv
        # The host runs the probes and Autobahn; a chroot's m0serve is
        # started through the chroot (its pid is the server's: every step execs).
        installed_m0serve=$venv/bin/m0serve
        if [ ${#run[@]} -gt 0 ]; then
            installed_m0serve=$venv/host-m0serve
            printf '#!/usr/bin/env bash\nexec bash %q run %q "$@"\n' \
                "$PWD/tests/sid.sh" "$PWD/$venv/bin/m0serve" >"$installed_m0serve"
            chmod +x "$installed_m0serve"
        fi
    fi
}

maturin_args=${MATURIN_PEP517_ARGS:-"--profile dev"}
installed_m0serve="" # the newest leg's m0serve, as the host runs it
release_venv=""      # the venv of the leg that installed the release build
# The interpreter of the cargo steps: the newest on the host. Every cargo
# step builds pyo3 (the pool crate always, the root crate with the python
# feature) for it: one configuration, so pyo3 is not rebuilt between steps,
# and test binaries that embed Python find its libpython (pyenv's are not on
# the loader's path).
cargo_python=""
for want in 3.15 3.14 3.13 3.12 3.11 3.10; do
    cargo_python=$(find_python "$want") && break
done
if [ -z "$cargo_python" ]; then
    cargo_python=$(command -v python3) || cargo_python=""
fi
if [ -n "$cargo_python" ]; then
    export PYO3_PYTHON=$cargo_python
    pylib=$("$cargo_python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
    export LD_LIBRARY_PATH=$pylib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

if ! step build cargo build --workspace --all-targets; then
    echo "build failed; nothing else can run" >&2
    exit 1
fi

first_backend=uring
uring_works
if [ $? -eq 1 ]; then
    if [ "${M0_REQUIRE_URING:-0}" = 1 ]; then
        failed+=("io_uring is refused here and M0_REQUIRE_URING=1")
    else
        echo "!!! io_uring is refused on this machine: SKIPPING the io_uring leg; running on portable only" >&2
        summary+=("SKIPPED: the io_uring leg (io_uring refused here)")
    fi
    first_backend=portable
fi

M0_TEST_BACKEND=$first_backend step "tests ($first_backend)" cargo test --workspace --no-fail-fast
if [ "$first_backend" = uring ]; then
    M0_TEST_BACKEND=portable step "e2e (portable)" cargo test --no-fail-fast --test '*'
fi
python_backends=portable
[ "$first_backend" = uring ] && python_backends=uring,portable
if [ -n "$cargo_python" ]; then
    step "tests (python feature)" cargo test --lib --features python
fi
step "cross (clippy: macOS, musl)" bash tests/cross_check.sh "${cargo_python:-python3}"
python_leg 3.10 dev "${python_backends%%,*}"
python_leg 3.15 wheel "$python_backends"
python_leg 3.14 smoke "$python_backends"

# The Autobahn|Testsuite WebSocket fuzzer, per backend: against the ASGI echo
# app served by the m0serve the last (newest) Python leg installed; where none
# was, against the Rust echo example (the server's WebSocket layer alone).
[ -z "$installed_m0serve" ] && summary+=("NOTE: Autobahn ran against the Rust echo example (no m0serve installed)")
for backend in ${python_backends//,/ }; do
    step "autobahn ($backend)" bash tests/autobahn.sh "$backend" $installed_m0serve
done

# Kernel TLS end to end in a guest on Debian's 6.1 kernel (emulated, bounded):
# against the 3.10 leg's m0serve, a venv of the host's own (a chroot's would
# need its chroot inside the guest).
if [ "$(uname -s)" = Linux ] && [ "$(id -u)" = 0 ] && target/py-3.10/bin/python -c '' 2>/dev/null; then
    step "ktls guest" timeout 900 bash tests/ktls.sh target/py-3.10/bin/m0serve
else
    summary+=("NOTE: the kernel TLS guest test did not run (it needs Linux, root and the 3.10 leg's own venv)")
fi

# The probes judge timing mechanisms by order and ratios, on the newest leg's
# release build (the dev profile's costs would move the GIL turn's slice).
# The probes themselves need only the standard library: the host's Python runs them.
if [ -n "$release_venv" ]; then
    probe_python=${cargo_python:-python3}
    for backend in ${python_backends//,/ }; do
        step "probe accept-batch ($backend)" timeout 300 "$probe_python" probes/accept_batch.py --m0serve "$installed_m0serve" --backend "$backend"
    done
    step "probe pool-fairness" timeout 300 "$probe_python" probes/pool_fairness.py --m0serve "$installed_m0serve" --backend "${python_backends%%,*}"
    for backend in ${python_backends//,/ }; do
        step "probe slow-client ($backend)" timeout 300 "$probe_python" probes/slow_client.py --m0serve "$installed_m0serve" --backend "$backend"
    done
else
    failed+=("the probes did not run: the newest Python leg installed no release build")
fi

# The fuzz package (its own workspace): the corpus and the regressions
# replayed through the targets' checks, then each target fuzzed with AFL++ for
# FUZZ_SECONDS, as many at once as there are CPUs (fuzz/run.sh: 3 min for the
# seven on CI's two at 45 s, a smoke run; long runs are by hand). CI installs
# cargo-afl (.ci/run); elsewhere a machine without it skips the fuzzing, saying so.
# The replay and its clippy build in the main target/ (--target-dir): its
# dependencies are the workspace's, already built there, where fuzz/target
# would build them all again. The AFL build stays in fuzz/target (its
# instrumented artifacts differ from every other build).
step "fuzz replay" cargo test --manifest-path fuzz/Cargo.toml --target-dir target
if cargo afl --version >/dev/null 2>&1; then
    step fuzz bash fuzz/run.sh "${FUZZ_SECONDS:-45}"
elif [ "${CI:-}" = true ]; then
    failed+=("cargo-afl is not installed (.ci/run installs it)")
else
    echo "!!! cargo-afl not installed (cargo install cargo-afl): SKIPPING the fuzzers" >&2
    summary+=("SKIPPED: the fuzzers (cargo-afl not installed)")
fi

# deploy/: the manifests against the Kubernetes schemas, the Dockerfile
# (hadolint), the YAML (yamllint); no image is built, no cluster reached
# (deploy/README.md says what that leaves unchecked).
step "deploy lint" timeout 300 bash tests/deploy_lint.sh "${cargo_python:-python3}"

step clippy cargo clippy --workspace --all-targets -- -D warnings
step "clippy (fuzz)" cargo clippy --manifest-path fuzz/Cargo.toml --target-dir target --all-targets -- -D warnings
if [ -n "$cargo_python" ]; then
    step "clippy (python feature)" cargo clippy --all-targets --features python,testing -- -D warnings
fi
step fmt cargo fmt --all --check
step "fmt (fuzz)" cargo fmt --manifest-path fuzz/Cargo.toml --all --check

echo
echo "==> time per step (total $((SECONDS / 60)) min $((SECONDS % 60)) s)"
printf '  %s\n' "${timings[@]}"
echo
echo "==> summary"
for line in "${summary[@]}"; do
    echo "  $line"
done
if [ "${#failed[@]}" -ne 0 ]; then
    for f in "${failed[@]}"; do
        echo "  FAILED: $f"
    done
    exit 1
fi
echo "  all passed"
