#!/bin/bash
# CTest entry point for the `rdma` label: runs an RDMA test on this host's RDMA device, or,
# where there is none, inside the Soft-RoCE qemu guest (tests/rdma/guest).
#
#   run_rdma_tests.sh BIN_DIR SOURCE_DIR CASE
#
# CASE: image      build the guest, or check that the cached one is up to date
#       transport  BIN_DIR/verbs_transport_test, all of it
#       suite      tests/rdma/rdma_suite.sh over $PSBENCH_RDMA_SUITE_TRANSPORT
#
# If /sys/class/infiniband is non-empty and ibv_devices lists a device, CASE runs on the host
# and no guest is involved. Otherwise the guest is built or reused (build-guest.sh caches by
# stamp), the binaries and the suite are copied into a fresh share directory (the guest sees
# the host's / read-only but not its /tmp, where CI may have cloned the repository) and CASE
# runs there. A guest that cannot be built or booted is a failure, never a skip.
#
# Env: PSBENCH_RDMA_GUEST_DIR        guest cache (default /var/tmp/psbench-rdma-guest)
#      PSBENCH_RDMA_GUEST_BUILD=0    never build: use the guest in PSBENCH_RDMA_GUEST_DIR as is
#                                    (build-guest.sh needs root and the Debian mirror)
#      PSBENCH_RDMA_WHERE            auto (default) | host | guest: where CASE runs
#      PSBENCH_RDMA_SUITE_TRANSPORT  transport for the suite (default grpc+verbs)
#      PSBENCH_RDMA_KEEP=1           keep the share directory (outputs of every case)
#      GUEST_TIMEOUT                 bound on the qemu run (default: suite 840 s, transport 480 s: hang guards, not targets;
#                                    the emulated guest runs 2-3x slower on a busy host)
#      PSBENCH_RDMA_SUITE_FILTER, PSBENCH_RDMA_SUITE_SKIP, PSBENCH_RDMA_SUITE_FLAGS, PSBENCH_RDMA_SUITE_TIMEOUT,
#      GTEST_FILTER                  passed on to the suite / the test binary in the guest
set -euo pipefail

say() { echo "run_rdma_tests: $*"; }
fail() { say "FAIL: $*"; exit 1; }
[ $# -eq 3 ] || { say "usage: run_rdma_tests.sh BIN_DIR SOURCE_DIR image|transport|suite"; exit 2; }
BIN=$(cd "$1" && pwd -P) || fail "no directory $1"
SRC=$(cd "$2" && pwd -P) || fail "no directory $2"
CASE=$3
case $CASE in image|transport|suite) ;; *) say "unknown CASE '$CASE'"; exit 2 ;; esac

GUEST_DIR=${PSBENCH_RDMA_GUEST_DIR:-/var/tmp/psbench-rdma-guest}
TRANSPORT=${PSBENCH_RDMA_SUITE_TRANSPORT:-grpc+verbs}
WHERE=${PSBENCH_RDMA_WHERE:-auto}
RDMA=$SRC/tests/rdma
T0=$EPOCHREALTIME
took() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

# A real device: /sys/class/infiniband non-empty and ibv_devices lists it (below its header).
host_devices() {
    [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ] || return 1
    command -v ibv_devices >/dev/null 2>&1 || return 1
    ibv_devices 2>/dev/null | awk 'NR > 2 && NF { printf "%s%s", sep, $1; sep = " " }' | grep .
}

case $WHERE in
    auto) if devs=$(host_devices); then WHERE=host; else WHERE=guest; fi ;;
    host) devs=$(host_devices) || fail "PSBENCH_RDMA_WHERE=host but this host has no RDMA device" ;;
    guest) ;;
    *) say "PSBENCH_RDMA_WHERE must be auto, host or guest"; exit 2 ;;
esac

if [ "$CASE" = transport ] && [ ! -x "$BIN/verbs_transport_test" ]; then
    fail "no $BIN/verbs_transport_test (build the verbs_transport_test target)"
fi

# --- on the host's own device ---------------------------------------------------------------
if [ "$WHERE" = host ]; then
    say "RDMA device(s) on this host: $devs; running $CASE here, no guest"
    case $CASE in
        image) exit 0 ;;
        transport) exec "$BIN/verbs_transport_test" --gtest_color=no ;;
        suite)
            out=$(mktemp -d "${TMPDIR:-/tmp}/psbench-rdma-suite.XXXXXX")
            rc=0
            "$RDMA/rdma_suite.sh" "$BIN" "$out" "$TRANSPORT" || rc=$?
            if [ "${PSBENCH_RDMA_KEEP:-0}" = 1 ]; then say "outputs kept in $out"; else rm -rf "$out"; fi
            exit "$rc" ;;
    esac
fi

# --- in the Soft-RoCE guest -----------------------------------------------------------------
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
    fail "no RDMA device here and no qemu-system-x86_64 for the Soft-RoCE guest (apt-get install --no-install-recommends qemu-system-x86)"

if [ "${PSBENCH_RDMA_GUEST_BUILD:-1}" = 0 ]; then
    [ -s "$GUEST_DIR/vmlinuz" ] && [ -s "$GUEST_DIR/initramfs.cpio.zst" ] ||
        fail "PSBENCH_RDMA_GUEST_BUILD=0 and no guest in $GUEST_DIR (build it: $RDMA/guest/build-guest.sh $GUEST_DIR)"
    say "using the guest in $GUEST_DIR as is (PSBENCH_RDMA_GUEST_BUILD=0)"
else
    rc=0
    "$RDMA/guest/build-guest.sh" "$GUEST_DIR" || rc=$?
    [ "$rc" -eq 0 ] || fail "cannot build the Soft-RoCE guest in $GUEST_DIR (build-guest.sh exited $rc; it needs root and the Debian mirror, see above)"
fi
if [ "$CASE" = image ]; then
    say "guest ready in $GUEST_DIR ($(took))"
    exit 0
fi

# The share directory: the only host folder under /tmp that the guest sees (at its own path).
SHARE=$(mktemp -d "${TMPDIR:-/tmp}/psbench-rdma.XXXXXX")
cleanup() {
    if [ "${PSBENCH_RDMA_KEEP:-0}" = 1 ]; then say "share directory kept: $SHARE"; else rm -rf "$SHARE"; fi
}
trap cleanup EXIT
mkdir -p "$SHARE/bin" "$SHARE/rdma" "$SHARE/out"
for f in psbench-ps psbench-worker psbench verbs_transport_test psbench_hostile_client; do
    [ -x "$BIN/$f" ] && cp "$BIN/$f" "$SHARE/bin/"
done
cp "$RDMA/rdma_suite.sh" "$RDMA/check_records.py" "$SHARE/rdma/"

case $CASE in
    transport)
        : "${GUEST_TIMEOUT:=480}"
        CMD=("$SHARE/bin/verbs_transport_test" --gtest_color=no) ;;
    suite)
        : "${GUEST_TIMEOUT:=840}"
        for f in psbench-ps psbench-worker psbench; do
            [ -x "$SHARE/bin/$f" ] || fail "no $BIN/$f (build it first)"
        done
        CMD=(bash "$SHARE/rdma/rdma_suite.sh" "$SHARE/bin" "$SHARE/out" "$TRANSPORT") ;;
esac
export GUEST_TIMEOUT
# For tests that look for their sibling binaries (the build tree may be invisible in the guest).
export PSBENCH_BIN_DIR=$SHARE/bin
export GUEST_ENV="PSBENCH_BIN_DIR PSBENCH_RDMA_SUITE_FILTER PSBENCH_RDMA_SUITE_SKIP PSBENCH_RDMA_SUITE_FLAGS PSBENCH_RDMA_SUITE_TIMEOUT GTEST_FILTER"

say "running $CASE in the Soft-RoCE guest (rxe0; GUEST_TIMEOUT=${GUEST_TIMEOUT}s): ${CMD[*]}"
cd "$SHARE"
rc=0
"$RDMA/guest/run-in-guest.sh" "$GUEST_DIR" "$SHARE" -- "${CMD[@]}" || rc=$?
if [ "$rc" -eq 0 ]; then
    say "PASS: $CASE in the guest ($(took) in all)"
else
    say "FAIL: $CASE in the guest exited $rc ($(took) in all; PSBENCH_RDMA_KEEP=1 keeps its outputs)"
fi
exit "$rc"
