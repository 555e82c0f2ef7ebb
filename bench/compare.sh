#!/usr/bin/env bash
# Measures, in one run and side by side, the floors (plain TCP, async generic gRPC echo, protobuf
# async and unary gRPC echoes) and psbench over gRPC, for the figures in bench/RESULTS.md:
#   latency: one 32 B buffer, 64 KiB, 1 MiB, 4 MiB and the default skew payload
#   bandwidth: one 1 MiB and one 4 MiB buffer
# in both modes, for each process placement, REPEAT times; then prints medians as Markdown,
# and how far the repetitions spread. Floors and psbench run the same number of messages.
# SWEEP=1 runs one buffer of 32 B, 256 B, 2K, 16K, 64K, 256K, 1M, 4M and 16M, latency and
# bandwidth, against the two floors on the same APIs (generic, async) only.
#
#   bench/compare.sh [BUILD_DIR=build] [OUT_DIR=compare-out]
# Env: REPEAT (default 3), PLACEMENTS (default "0/1 0/0": server CPU / client CPU),
#      SWEEP=1 as above, QUICK=1 for a smoke run with few iterations.
set -euo pipefail
build=${1:-build}
out=${2:-compare-out}
repeat=${REPEAT:-3}
placements=${PLACEMENTS:-"0/1 0/0"}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
rm -f "$out"/*.jsonl

lat_small=20000 lat_large=2000 lat_skew=500 lat_huge=200 bw_small=5000 bw_iters=1000 bw_huge=300
if [[ -n "${QUICK:-}" ]]; then
  lat_small=200 lat_large=50 lat_skew=20 lat_huge=10 bw_small=100 bw_iters=50 bw_huge=20
fi
if [[ -n "${SWEEP:-}" ]]; then
  lat_sizes="32 256 2K 16K 64K 256K 1M 4M 16M" bw_sizes=$lat_sizes floors="generic async"
else
  lat_sizes="32 64K 1M 4M" bw_sizes="1M 4M" floors="tcp generic async unary"
fi
bytes() {  # 64K -> 65536
  local n=${1%[KM]}
  case $1 in *K) echo $((n * 1024)) ;; *M) echo $((n * 1048576)) ;; *) echo "$n" ;; esac
}
# Messages per size, the same for floors and psbench (about a second or two each here).
lat_n() {
  local b; b=$(bytes "$1")
  if ((b <= 16384)); then echo $lat_small; elif ((b <= 1048576)); then echo $lat_large
  elif ((b <= 4194304)); then echo $lat_skew; else echo $lat_huge; fi
}
bw_n() {
  local b; b=$(bytes "$1")
  if ((b < 1048576)); then echo $bw_small; elif ((b <= 4194304)); then echo $bw_iters; else echo $bw_huge; fi
}
pingpong_sizes="" stream_sizes=""
for size in $lat_sizes; do pingpong_sizes+=" $size:$(lat_n "$size")"; done
for size in $bw_sizes; do stream_sizes+=" $size:$(bw_n "$size")"; done

for rep in $(seq "$repeat"); do
  for place in $placements; do
    server=${place%/*} client=${place#*/}
    tag="$out/${server}_${client}_${rep}"  # CPU lists have dashes, never underscores
    echo "# repetition $rep, server CPU $server, client CPU $client" >&2
    SERVER_CPU=$server CLIENT_CPU=$client FLOORS=$floors PINGPONG_SIZES=$pingpong_sizes \
      STREAM_SIZES=$stream_sizes "$here/floors/run_floors.sh" "$build" "${tag}_floors.jsonl" >/dev/null
    run() {
      "$build/bin/psbench" run --ps-cpu="$server" --worker-cpu="$client" \
        --json="${tag}_psbench.jsonl" "$@" >/dev/null
    }
    for mode in non-serialized serialized; do
      for size in $lat_sizes; do
        n=$(lat_n "$size")
        run --benchmark=latency --mode="$mode" --sizes="$size:$size" --iterations="$n" --warmup-iterations=$((n / 10))
      done
      for size in $bw_sizes; do
        n=$(bw_n "$size")
        run --benchmark=bandwidth --mode="$mode" --sizes="$size:$size" --iterations="$n" --warmup-iterations=$((n / 10))
      done
      [[ -n "${SWEEP:-}" ]] && continue
      run --benchmark=latency --mode="$mode" --scheme=skew --iterations=$lat_skew --warmup-iterations=$((lat_skew / 10))
    done
    # Busy polling on both sides (perftest's default), non-serialized; only with a core each
    # (two spinners on one core take turns by the scheduler's time slice: milliseconds).
    [[ "$server" == "$client" || -n "${SWEEP:-}" ]] && continue
    run --benchmark=latency --busy-poll --sizes=32:32 --iterations=$lat_small --warmup-iterations=$((lat_small / 10))
    run --benchmark=latency --busy-poll --scheme=skew --iterations=$lat_skew --warmup-iterations=$((lat_skew / 10))
  done
done
python3 "$here/summarize_compare.py" "$out"
