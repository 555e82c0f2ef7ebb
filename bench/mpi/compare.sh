#!/usr/bin/env bash
# The raw MPI floor (psbench-floor-mpi, OSU-style ping-pong and windowed stream, at
# MPI_THREAD_SINGLE and at MPI_THREAD_FUNNELED, the level grpc+mpi runs at) against
# psbench over grpc+mpi and over plain grpc, for single-buffer payloads of 32 B, 64 KiB,
# 1 MiB and 4 MiB, for bench/RESULTS.md. Rounds alternate the three, so that drift on a
# shared machine hits them alike; the summary takes medians over rounds, and the floor at
# its best round.
#
#   bench/mpi/compare.sh [BUILD_DIR=build] [OUT_DIR=mpi-compare-out]
# Env: REPEAT (rounds, default 5), SIZES (default "32 64K 1M 4M"), WINDOW (default 16).
set -euo pipefail
build=$(cd "${1:-build}" && pwd -P)
out=${2:-mpi-compare-out}
here=$(cd "$(dirname "$0")" && pwd -P)
repeat=${REPEAT:-5}
sizes=${SIZES:-32 64K 1M 4M}
window=${WINDOW:-16}
mkdir -p "$out"
rm -f "$out"/*.jsonl
mpirun=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)

# More iterations for small messages, as the OSU benchmarks do; at least 1000 for large ones,
# whose first rounds fault in the receive buffers.
iterations() {
  case $1 in
    32|64K) echo 10000 ;;
    *) echo 1000 ;;
  esac
}

for ((round = 1; round <= repeat; round++)); do
  echo "round $round/$repeat" >&2
  for size in $sizes; do
    n=$(iterations "$size")
    # The floor at MPI_THREAD_SINGLE, and at the level grpc+mpi needs (FUNNELED: gRPC runs
    # threads of its own), which Open MPI pays for with locks in MPI itself.
    for level in single funneled; do
      file=floor.jsonl
      [[ $level == funneled ]] && file=floor-funneled.jsonl
      "${mpirun[@]}" -np 2 "$build/bin/psbench-floor-mpi" --sizes="$size" --iterations="$n" \
        --window="$window" --thread-level="$level" --json="$out/$file" > /dev/null
    done
    for transport in grpc+mpi grpc; do
      "$build/bin/psbench" run --transport="$transport" --benchmark=latency --sizes="$size:$size" \
        --iterations="$n" --warmup-iterations=$((n / 10)) --json="$out/$transport.jsonl" > /dev/null
      "$build/bin/psbench" run --transport="$transport" --benchmark=bandwidth --sizes="$size:$size" \
        --window="$window" --iterations="$n" --warmup-iterations=$((n / 10)) \
        --json="$out/$transport.jsonl" > /dev/null
    done
  done
done
python3 "$here/summarize_compare.py" "$out"
