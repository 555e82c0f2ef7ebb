#!/usr/bin/env bash
# Runs INSIDE one Soft-RoCE guest boot (or on a host with a real RDMA device): perftest's
# ib_write_lat / ib_write_bw against psbench latency / bandwidth over grpc+verbs, and plain
# grpc for reference, for 32 B, 64 KiB and 1 MiB single buffers, REPEAT times, interleaved so
# that the emulator's drift hits every tool alike. Writes raw outputs and JSON Lines to OUT.
#
#   perftest_compare.sh BIN_DIR OUT_DIR
# Latency runs busy-polling on both sides, as ib_write_lat does. Bandwidth runs both ways:
# busy (both sides spin) and event (both sleep on completions); ib_write_bw's server does not
# poll at all, RDMA WRITE needs nothing of it. Like for like: ib_write_bw keeps as many writes
# in flight (-t, its queue depth) as psbench keeps payloads (--window), WINDOW of each.
# Env: REPEAT (default 5), DEVICE (default rxe0), WINDOW (default 16), QUICK=1 for a smoke run.
set -uo pipefail
bin=$1
out=$2
repeat=${REPEAT:-5}
dev=${DEVICE:-rxe0}
window=${WINDOW:-16}
mkdir -p "$out"
lat_iters=2000 bw_iters_small=2000 bw_iters_large=300
if [[ -n "${QUICK:-}" ]]; then lat_iters=100 bw_iters_small=100 bw_iters_large=20; fi


# ib_* SERVER & CLIENT pair on one device; perftest's own TCP exchange on loopback. Extra
# arguments go to both.
perftest() {
  local tool=$1 size=$2 iters=$3 log=$4
  shift 4
  timeout 120 "$tool" -d "$dev" -x 0 -s "$size" -n "$iters" -F "$@" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  timeout 120 "$tool" -d "$dev" -x 0 -s "$size" -n "$iters" -F "$@" localhost >"$log" 2>&1
  local rc=$?
  wait $server
  return $rc
}

psbench() {
  local poll=$1 transport=$2 bench=$3 size=$4 iters=$5 busy="" window_flag=""
  [[ $poll == busy ]] && busy=--busy-poll
  [[ $bench == bandwidth ]] && window_flag=--window=$window
  timeout 300 "$bin/psbench" run --transport="$transport" --benchmark="$bench" \
    --sizes="$size:$size" --iterations="$iters" --warmup-iterations=$((iters / 10 + 1)) $window_flag \
    $busy --json="$out/psbench-$poll.jsonl" >>"$out/psbench.txt" 2>&1
}

fail=0
for rep in $(seq "$repeat"); do
  for size in 32 65536 1048576; do
    bw_iters=$bw_iters_small
    [[ $size -ge 1048576 ]] && bw_iters=$bw_iters_large
    lat=$lat_iters
    [[ $size -ge 1048576 ]] && lat=$((lat_iters / 10))
    echo "# rep $rep size $size" >&2
    perftest ib_write_lat "$size" "$lat" "$out/ib_write_lat-$size-$rep.txt" || fail=1
    psbench busy grpc+verbs latency "$size" "$lat" || fail=1
    psbench busy grpc latency "$size" "$lat" || fail=1
    perftest ib_write_bw "$size" "$bw_iters" "$out/ib_write_bw-$size-$rep.txt" -t "$window" || fail=1
    psbench busy grpc+verbs bandwidth "$size" "$bw_iters" || fail=1
    psbench event grpc+verbs bandwidth "$size" "$bw_iters" || fail=1
    psbench event grpc bandwidth "$size" "$bw_iters" || fail=1
  done
done
exit $fail
