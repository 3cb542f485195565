#!/usr/bin/env bash
# The test command: build, the whole workspace's tests on the io_uring backend,
# the end-to-end suites again on the portable backend, then clippy and rustfmt.
# Every step runs even if an earlier one failed; the exit status is non-zero if
# any failed. Usage: bash tests/run.sh
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

# step NAME CMD...: run CMD, keep its output, record its outcome.
step() {
    local name=$1
    shift
    echo "==> $name: $*"
    local log="$logs/$(echo "$name" | tr -c 'a-zA-Z0-9' _).log"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    # The test runners' summary lines, prefixed by the step.
    while IFS= read -r line; do
        summary+=("$name: $line")
    done < <(awk '
        /^ *Running /   { crate = $NF; sub(/.*\//, "", crate); sub(/-[0-9a-f]+\)$/, "", crate)
                          suite = ($2 == "unittests") ? crate " " $3 : $2 }
        /^ *Doc-tests / { suite = "doc-tests " $2 }
        /^test result:/ { sub(/^test result: /, ""); print suite ": " $0 }' "$log")
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
step clippy cargo clippy --workspace --all-targets -- -D warnings
step fmt cargo fmt --all --check

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
