#!/usr/bin/env bash
# The test command: build, the whole workspace's tests on the io_uring backend,
# the end-to-end suites again on the portable backend, the library's tests with
# the python feature, then the Python leg: for the oldest and the newest
# supported CPython (3.9, 3.13), a virtualenv with `pip install .` and
# tests/python/requirements.txt, and the pytest suite (the newest on both
# backends, the oldest on the first; two xdist workers, then the `serial`
# tests alone); the Autobahn|Testsuite WebSocket fuzzer
# (tests/autobahn.sh) on both backends, against an ASGI echo app served by the
# newest leg's m0serve; the probes on that same release build; the fuzz
# corpus replayed and each AFL++ fuzz target run for FUZZ_SECONDS (default
# 45), one per CPU at a time (fuzz/); deploy/'s manifests, Dockerfile and YAML
# linted (tests/deploy_lint.sh); then clippy (with and without the python
# feature, and of fuzz/) and rustfmt.
# Every step runs even if an earlier one failed; the exit status is non-zero if
# any failed. Each step's wall time is printed after the summary.
# Usage: bash tests/run.sh
#
# The Python leg finds each interpreter through pyenv (or /root/.pyenv), else
# as python3.9 / python3.13 on PATH; where neither is found it runs on python3
# and says so.
# - The newest leg installs with a plain `pip install .`: the release profile
#   users get, which the probes need too (their timing ratios assume it), so
#   one build serves both.
# - The oldest leg builds with cargo's dev profile (MATURIN_PEP517_ARGS,
#   overridable): quicker to build, and its debug assertions run under the
#   suite. It runs on the first backend only: the backends are Rust and do not
#   vary with the interpreter, which the newest leg already covers on both.
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
        /^fuzz [a-z_]+: [0-9]+ execs/ { print $0 }
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

# python_leg PYTHON NAME BACKENDS [PROFILE_ARGS]: a fresh-enough virtualenv
# under target/, m0serve installed from this checkout the way a user does
# (PROFILE_ARGS, as MATURIN_PEP517_ARGS: empty for the release profile), and
# the pytest suite on BACKENDS.
python_leg() {
    local python=$1 name=$2 backends=$3 profile=${4:-} venv=target/py-$2
    step "venv ($name)" "$python" -m venv "$venv" || return
    step "pip install ($name)" "$venv/bin/python" -m pip install -q -r tests/python/requirements.txt || return
    # --force-reinstall: the version does not change between commits, the code does.
    # maturin builds for the venv's interpreter, not the PYO3_PYTHON of the cargo steps.
    MATURIN_PEP517_ARGS=$profile \
        step "pip install . ($name${profile:+, $profile})" env -u PYO3_PYTHON "$venv/bin/python" -m pip install -q --force-reinstall --no-deps . || return
    installed_m0serve=$venv/bin/m0serve
    [ -z "$profile" ] && release_venv=$venv
    # Two pytest-xdist workers (the suite mostly waits on servers, so this
    # halves its time on CI's two CPUs), then the tests marked `serial` alone:
    # they assert a latency bound or a CPU share (tests/python/conftest.py).
    local pytest=("$venv/bin/python" -m pytest tests/python -q -p no:cacheprovider)
    M0_TEST_BACKENDS=$backends step "pytest ($name, $backends)" "${pytest[@]}" \
        -n 2 --dist loadgroup -m "not serial" --junitxml="target/pytest-$name.xml"
    M0_TEST_BACKENDS=$backends step "pytest ($name, $backends, serial)" "${pytest[@]}" \
        -m serial --junitxml="target/pytest-$name-serial.xml"
}

maturin_args=${MATURIN_PEP517_ARGS:-"--profile dev"}
installed_m0serve=""  # set by python_leg once `pip install .` succeeded
release_venv=""      # the venv of the leg that built the release profile
newest_python=""
pythons=()
for want in 3.9 3.13; do
    if p=$(find_python "$want"); then
        pythons+=("$p")
        newest_python=$p
    else
        echo "!!! CPython $want not found (pyenv, python$want): not tested" >&2
        summary+=("SKIPPED: CPython $want (not found)")
    fi
done
if [ "${#pythons[@]}" -eq 0 ]; then
    p=$(command -v python3) && {
        echo "!!! falling back to $p ($("$p" --version 2>&1)) for the Python leg" >&2
        summary+=("NOTE: the Python leg ran on $("$p" --version 2>&1) only")
        pythons+=("$p")
        newest_python=$p
    }
fi
if [ -n "$newest_python" ]; then
    # Every cargo step builds pyo3 (the pool crate always, the root crate with
    # the python feature) for the newest interpreter: one configuration, so
    # pyo3 is not rebuilt between steps, and test binaries that embed Python
    # find its libpython (pyenv's are not on the loader's path).
    export PYO3_PYTHON=$newest_python
    pylib=$("$newest_python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
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
if [ -n "$newest_python" ]; then
    step "tests (python feature)" cargo test --lib --features python
fi
for p in "${pythons[@]}"; do
    version=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ "$p" = "$newest_python" ]; then
        python_leg "$p" "$version" "$python_backends"
    else
        python_leg "$p" "$version" "${python_backends%%,*}" "$maturin_args"
    fi
done
if [ "${#pythons[@]}" -eq 0 ]; then
    failed+=("no Python interpreter found for the Python leg")
fi

# The Autobahn|Testsuite WebSocket fuzzer, per backend: against the ASGI echo
# app served by the m0serve the last (newest) Python leg installed; where none
# was, against the Rust echo example (the server's WebSocket layer alone).
[ -z "$installed_m0serve" ] && summary+=("NOTE: Autobahn ran against the Rust echo example (no m0serve installed)")
for backend in ${python_backends//,/ }; do
    step "autobahn ($backend)" bash tests/autobahn.sh "$backend" $installed_m0serve
done

# The probes judge timing mechanisms by order and ratios, on the newest leg's
# release build (the dev profile's costs would move the GIL turn's slice).
if [ -n "$release_venv" ]; then
    venv=$release_venv
    for backend in ${python_backends//,/ }; do
        step "probe accept-batch ($backend)" timeout 300 "$venv/bin/python" probes/accept_batch.py --m0serve "$venv/bin/m0serve" --backend "$backend"
    done
    step "probe pool-fairness" timeout 300 "$venv/bin/python" probes/pool_fairness.py --m0serve "$venv/bin/m0serve" --backend "${python_backends%%,*}"
    for backend in ${python_backends//,/ }; do
        step "probe slow-client ($backend)" timeout 300 "$venv/bin/python" probes/slow_client.py --m0serve "$venv/bin/m0serve" --backend "$backend"
    done
elif [ -n "$newest_python" ]; then
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
step "deploy lint" timeout 300 bash tests/deploy_lint.sh "${newest_python:-python3}"

step clippy cargo clippy --workspace --all-targets -- -D warnings
step "clippy (fuzz)" cargo clippy --manifest-path fuzz/Cargo.toml --target-dir target --all-targets -- -D warnings
if [ -n "$newest_python" ]; then
    step "clippy (python feature)" cargo clippy --all-targets --features python -- -D warnings
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
