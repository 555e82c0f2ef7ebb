#!/usr/bin/env bash
# perftest against psbench grpc+verbs (and grpc) in ONE Soft-RoCE guest boot, for
# bench/RESULTS.md. Needs root (the guest build) and the packages of deploy/install-deps.sh.
#
#   bench/rdma/compare_in_guest.sh [BUILD_DIR=build] [OUT_DIR=rdma-compare-out]
# Env: REPEAT (default 5), QUICK=1,
#      PSBENCH_RDMA_GUEST_DIR (default /var/tmp/psbench-rdma-guest).
set -euo pipefail
build=$(cd "${1:-build}" && pwd -P)
out=${2:-rdma-compare-out}
here=$(cd "$(dirname "$0")" && pwd -P)
guest=$here/../../tests/rdma/guest
guest_dir=${PSBENCH_RDMA_GUEST_DIR:-/var/tmp/psbench-rdma-guest}
"$guest/build-guest.sh" "$guest_dir" >&2
share=$(mktemp -d /tmp/psbench-rdma-compare.XXXXXX)
trap 'rm -rf "$share"' EXIT
mkdir -p "$share/bin" "$out"
cp "$build/bin/psbench" "$build/bin/psbench-ps" "$build/bin/psbench-worker" "$share/bin/"
cp "$here/perftest_compare.sh" "$share/"
export REPEAT=${REPEAT:-5} QUICK=${QUICK:-} WINDOW=${WINDOW:-16}
GUEST_ENV="REPEAT QUICK WINDOW" GUEST_TIMEOUT=${GUEST_TIMEOUT:-1800} \
  "$guest/run-in-guest.sh" "$guest_dir" "$share" -- \
  bash "$share/perftest_compare.sh" "$share/bin" "$share/out" >&2
cp -r "$share/out/." "$out/"
python3 "$here/summarize_perftest.py" "$out"
