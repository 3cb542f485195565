#!/usr/bin/env bash
# Kernel TLS end to end (tests/ktls/guest.sh) inside a throwaway guest booted
# on Debian's 6.1 kernel, whose tls module this machine's kernel may lack
# (../shared/tools/kernel_vm.sh; KERNEL_VM overrides it). The guest is
# emulated in software: a few seconds a boot, far more per server started,
# so the whole run is bounded by KTLS_TIMEOUT (600 s). Function, never timing.
#
# Usage: bash tests/ktls.sh M0SERVE   (a virtualenv's m0serve the host runs)
set -uo pipefail
m0serve=${1:?usage: ktls.sh M0SERVE}
vm=${KERNEL_VM:-$(cd .. && pwd)/shared/tools/kernel_vm.sh}
[ -f "$vm" ] || vm=/work/shared/tools/kernel_vm.sh
[ -f "$vm" ] || { echo "ktls: no kernel_vm.sh (set KERNEL_VM)" >&2; exit 2; }
KERNEL_VM_TIMEOUT=${KTLS_TIMEOUT:-600} bash "$vm" "bash tests/ktls/guest.sh $(realpath "$m0serve")"
rc=$?
# 125: no guest came up (no apt for the kernel package, no qemu): this
# machine cannot run the test, which says so in the summary rather than
# failing it. A guest that timed out (124) or a check that failed is a failure.
if [ $rc -eq 125 ]; then
    echo "ktls guest: not run (kernel_vm.sh could not boot a guest here)"
    exit 0
fi
exit $rc
