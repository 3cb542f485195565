#!/usr/bin/env bash
# Builds the AFL++ targets and fuzzes each for SECONDS (default 60), FUZZ_JOBS
# at a time (default: one per CPU; each afl-fuzz uses one), starting from
# corpus/<target>/. Prints a summary line per target
# (total execs, execs/s, crashes, hangs); copies every crashing or hanging
# input into regressions/<target>/ (commit them: `cargo test` replays them);
# exits non-zero if any target crashed, hung or could not run.
# Usage: bash fuzz/run.sh [SECONDS] [TARGET...]   (needs `cargo install cargo-afl`)
set -uo pipefail
cd "$(dirname "$0")"

secs=${1:-60}
shift $(($# > 0 ? 1 : 0))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(head chunked conn_split proxy_split response_roundtrip ws_frames ws_handshake h2_frames)
out=target/afl

# Non-interactive, and indifferent to a machine it cannot tune: CI runs as root
# in a container where core_pattern and the CPU governor may not be writable,
# and the cores may all be busy (no affinity then).
export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1

if ! cargo afl build --release --features afl; then
    echo "fuzz: the targets did not build" >&2
    exit 1
fi

# stat FILE KEY: one value of a fuzzer_stats file.
stat() {
    awk -F' *: *' -v k="$2" '$1 == k { print $2 }' "$1" 2>/dev/null
}

mkdir -p "$out"
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}

# fuzz_one TARGET: fuzz it, keep what it found, and write its summary line
# (and its status) into $out/TARGET.result.
fuzz_one() {
    local t=$1 log=$out/$1.log rc stats execs rate found=0 kind f name line status=0
    rm -rf "${out:?}/$t"
    echo "==> fuzz $t for ${secs}s (log: fuzz/$log)"
    # -t: a hang is an input that takes over a second (the slowest seed takes a few ms).
    cargo afl fuzz -V "$secs" -t 1000 -i "corpus/$t" -o "$out/$t" "target/release/$t" >"$log" 2>&1
    rc=$?
    stats=$out/$t/default/fuzzer_stats
    execs=$(stat "$stats" execs_done)
    rate=$(stat "$stats" execs_per_sec)
    for kind in crashes hangs; do
        for f in "$out/$t/default/$kind"/id:*; do
            [ -f "$f" ] || continue
            mkdir -p "regressions/$t"
            name=${kind%es}
            name=${name%s}-$(sha1sum "$f" | cut -c1-16)
            cp "$f" "regressions/$t/$name"
            # In hex too: on CI the file is lost with the clone, the log is not.
            echo "fuzz $t: $name: fuzz/regressions/$t/$name: $(head -c 4096 "$f" | od -An -v -tx1 | tr -d ' \n')"
            found=$((found + 1))
        done
    done
    line="fuzz $t: ${execs:-0} execs, ${rate:-0} execs/s, $(stat "$stats" saved_crashes) crashes, $(stat "$stats" saved_hangs) hangs"
    if [ "$rc" -ne 0 ] || [ -z "$execs" ]; then
        tail -20 "$log"
        line="$line (afl-fuzz failed: exit $rc)"
        status=1
    fi
    [ "$found" -gt 0 ] && status=1
    echo "$line"
    printf '%s\n%s\n' "$status" "$line" >"$out/$t.result"
}

running=0
for t in "${targets[@]}"; do
    rm -f "$out/$t.result"
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait

status=0
summary=()
for t in "${targets[@]}"; do
    if [ -f "$out/$t.result" ]; then
        [ "$(head -1 "$out/$t.result")" = 0 ] || status=1
        summary+=("$(tail -1 "$out/$t.result")")
    else
        summary+=("fuzz $t: no result (the run died)")
        status=1
    fi
done

echo "==> fuzz summary"
printf '  %s\n' "${summary[@]}"  # indented: tests/run.sh collects the unindented lines above
exit $status
