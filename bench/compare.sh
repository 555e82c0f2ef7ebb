#!/usr/bin/env bash
# Measures, in one run and side by side, the floors (plain TCP, async generic gRPC echo, protobuf
# async and unary gRPC echoes) and psbench over gRPC, for the figures in bench/RESULTS.md:
#   latency: one 32 B buffer, 64 KiB, 1 MiB, 4 MiB and the default skew payload
#   bandwidth: one 1 MiB and one 4 MiB buffer
# in both modes, for each process placement, REPEAT times; then prints medians as Markdown.
#
#   bench/compare.sh [BUILD_DIR=build] [OUT_DIR=compare-out]
# Env: REPEAT (default 3), PLACEMENTS (default "0/1 0/0": server CPU / client CPU),
#      QUICK=1 for a smoke run with few iterations.
set -euo pipefail
build=${1:-build}
out=${2:-compare-out}
repeat=${REPEAT:-3}
placements=${PLACEMENTS:-"0/1 0/0"}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
rm -f "$out"/*.jsonl

lat_small=20000 lat_large=2000 lat_skew=500 bw_iters=1000 floor_args=""
if [[ -n "${QUICK:-}" ]]; then
  lat_small=200 lat_large=50 lat_skew=20 bw_iters=50 floor_args="--iterations=100"
fi

for rep in $(seq "$repeat"); do
  for place in $placements; do
    server=${place%/*} client=${place#*/}
    tag="$out/${server}-${client}-${rep}"
    echo "# repetition $rep, server CPU $server, client CPU $client" >&2
    SERVER_CPU=$server CLIENT_CPU=$client FLOOR_ARGS="$floor_args" \
      "$here/floors/run_floors.sh" "$build" "$tag-floors.jsonl" >/dev/null
    run() {
      "$build/bin/psbench" run --ps-cpu="$server" --worker-cpu="$client" \
        --json="$tag-psbench.jsonl" "$@" >/dev/null
    }
    for mode in non-serialized serialized; do
      run --benchmark=latency --mode="$mode" --sizes=32:32 --iterations=$lat_small --warmup-iterations=$((lat_small / 10))
      run --benchmark=latency --mode="$mode" --sizes=64K:64K --iterations=$lat_large --warmup-iterations=$((lat_large / 10))
      run --benchmark=latency --mode="$mode" --sizes=1M:1M --iterations=$lat_large --warmup-iterations=$((lat_large / 10))
      run --benchmark=latency --mode="$mode" --sizes=4M:4M --iterations=$lat_skew --warmup-iterations=$((lat_skew / 10))
      run --benchmark=latency --mode="$mode" --scheme=skew --iterations=$lat_skew --warmup-iterations=$((lat_skew / 10))
      run --benchmark=bandwidth --mode="$mode" --sizes=1M:1M --iterations=$bw_iters --warmup-iterations=$((bw_iters / 10))
      run --benchmark=bandwidth --mode="$mode" --sizes=4M:4M --iterations=$bw_iters --warmup-iterations=$((bw_iters / 10))
    done
    # Busy polling on both sides (perftest's default), non-serialized; only with a core each
    # (two spinners on one core take turns by the scheduler's time slice: milliseconds).
    [[ "$server" == "$client" ]] && continue
    run --benchmark=latency --busy-poll --sizes=32:32 --iterations=$lat_small --warmup-iterations=$((lat_small / 10))
    run --benchmark=latency --busy-poll --scheme=skew --iterations=$lat_skew --warmup-iterations=$((lat_skew / 10))
  done
done
python3 "$here/summarize_compare.py" "$out"
