#!/bin/bash
# Checks that run_rdma_tests.sh fails, with its reason, when there is no usable guest: an RDMA
# test must never pass or skip because the guest could not start. Cheap: no build, no boot.
#
#   runner_selftest.sh BIN_DIR SOURCE_DIR
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: runner_selftest.sh BIN_DIR SOURCE_DIR" >&2; exit 2; }
BIN=$1 SRC=$2
RUNNER=$SRC/tests/rdma/run_rdma_tests.sh
TMP=$(mktemp -d "${TMPDIR:-/tmp}/psbench-rdma-selftest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0

# expect_failure NAME PATTERN ENV...: the runner (suite case, forced into the guest, never
# building one) must exit non-zero and print PATTERN.
expect_failure() {
    local name=$1 pattern=$2 rc=0
    shift 2
    env PSBENCH_RDMA_WHERE=guest PSBENCH_RDMA_GUEST_BUILD=0 GUEST_TIMEOUT=60 "$@" \
        "$RUNNER" "$BIN" "$SRC" suite >"$TMP/$name.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "FAIL $name: the runner exited 0"
    elif ! grep -q -- "$pattern" "$TMP/$name.log"; then
        echo "FAIL $name: exit $rc but no '$pattern' in its output"
    else
        echo "PASS $name: exit $rc, '$pattern'"
        return 0
    fi
    sed 's/^/  /' "$TMP/$name.log"
    failures=$((failures + 1))
}

# No guest at all.
mkdir "$TMP/empty"
expect_failure no-guest "run_rdma_tests: FAIL: PSBENCH_RDMA_GUEST_BUILD=0 and no guest" \
    PSBENCH_RDMA_GUEST_DIR="$TMP/empty"

# A guest that cannot boot: qemu refuses a kernel that is random bytes.
mkdir "$TMP/broken"
head -c 65536 /dev/urandom >"$TMP/broken/vmlinuz"
head -c 65536 /dev/urandom >"$TMP/broken/initramfs.cpio.zst"
expect_failure broken-guest "run-in-guest: guest wrote no exit code" \
    PSBENCH_RDMA_GUEST_DIR="$TMP/broken"

[ "$failures" -eq 0 ]
