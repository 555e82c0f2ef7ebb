#!/usr/bin/env bash
# The knee of each transport under open-loop load (docs/load.md), for bench/RESULTS.md: a
# latency sweep of one 1 KiB buffer over Poisson rates, per transport, with the PS and the
# worker on separate CPUs (0 and 1) and then sharing CPU 0. Writes, per placement, the records
# (knee-S_W.jsonl), psbench's output (knee-S_W.txt: a table and the knee per transport) and
# psbench report's Markdown (knee-S_W.md).
#
#   bench/load/knee.sh [BUILD_DIR=build] [OUT_DIR=knee-out]
# Env: RATES (default poisson:1000..256000*2), TRANSPORTS (default
#      grpc/non-serialized,grpc/serialized,grpc+mpi), PLACEMENTS (default "0/1 0/0": PS CPU /
#      worker CPU), DURATION (per rate, default 2s).
set -euo pipefail
build=${1:-build}
out=${2:-knee-out}
rates=${RATES:-poisson:1000..256000*2}
transports=${TRANSPORTS:-grpc/non-serialized,grpc/serialized,grpc+mpi}
placements=${PLACEMENTS:-"0/1 0/0"}
duration=${DURATION:-2s}
mkdir -p "$out"
for place in $placements; do
  file="$out/knee-${place%/*}_${place#*/}"
  rm -f "$file.jsonl"
  echo "# PS on CPU ${place%/*}, worker on CPU ${place#*/}" >&2
  "$build/bin/psbench" run --transports="$transports" --benchmark=latency --sizes=1K:1K \
    --load-sweep="$rates" --duration="$duration" --warmup=0.5s --ps-cpu="${place%/*}" \
    --worker-cpu="${place#*/}" --json="$file.jsonl" >"$file.txt"
  "$build/bin/psbench" report "$file.jsonl" --markdown="$file.md" >/dev/null
  grep -E '^# (open-loop load|knee|no knee)' "$file.txt" >&2
done
