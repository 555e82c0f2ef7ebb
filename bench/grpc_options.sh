#!/usr/bin/env bash
# Measures gRPC's options side by side: psbench's grpc transport with each option set of
# OPTIONS, alternating, REPEAT times, in each placement; prints the medians as Markdown
# (p50 round trip from 32 B to 16 MiB, bandwidth from 64 KiB to 16 MiB, window 16).
#
#   bench/grpc_options.sh [BUILD_DIR=build] [OUT_DIR=grpc-options-out]
#   OPTIONS="--grpc-tx-zerocopy=0|--grpc-tx-zerocopy=16K" REPEAT=3 PLACEMENTS="0/1 0/0" ...
#   OPTIONS="--grpc-api=cq|--grpc-api=callback" REPEAT=3 ...
#
# OPTIONS: option sets separated by '|', each a space-separated list of psbench run flags.
set -euo pipefail
build=${1:-build}
out=${2:-grpc-options-out}
repeat=${REPEAT:-3}
placements=${PLACEMENTS:-"0/1 0/0"}
IFS='|' read -r -a sets <<<"${OPTIONS:---grpc-tx-zerocopy=0|--grpc-tx-zerocopy=16K}"
mkdir -p "$out"
rm -f "$out"/*.jsonl
for rep in $(seq "$repeat"); do
  for place in $placements; do
    server=${place%/*} client=${place#*/}
    for i in "${!sets[@]}"; do
      read -r -a flags <<<"${sets[$i]}"
      echo "# repetition $rep, server CPU $server, client CPU $client: ${sets[$i]}" >&2
      json="$out/${server}_${client}_${i}.jsonl"
      "$build/bin/psbench" run --ps-cpu="$server" --worker-cpu="$client" --json="$json" "${flags[@]}" \
        --benchmark=latency --sizes=32:16M --iterations=300 --warmup-iterations=30 >/dev/null
      "$build/bin/psbench" run --ps-cpu="$server" --worker-cpu="$client" --json="$json" "${flags[@]}" \
        --benchmark=bandwidth --sizes=64K:16M --iterations=200 --warmup-iterations=20 >/dev/null
    done
  done
done
SETS="$(printf '%s|' "${sets[@]}")" /usr/bin/env python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
out = sys.argv[1]
sets = os.environ["SETS"].rstrip("|").split("|")
cells = collections.defaultdict(list)  # (placement, set, benchmark, bytes) -> values
for path in glob.glob(os.path.join(out, "*.jsonl")):
    server, client, index = os.path.basename(path)[:-len(".jsonl")].split("_")
    for line in open(path):
        r = json.loads(line)
        if r.get("kind"):  # a comparison's or floor's record (--repetitions, --transports): not a run
            continue
        value = r["latency_us"]["p50"] if r["benchmark"] == "latency" else r["mb_per_s"]
        cells[(f"{server}/{client}", int(index), r["benchmark"], r["payload_bytes"])].append(value)
for place in sorted({k[0] for k in cells}):
    for bench, unit in (("latency", "p50 round trip, µs"), ("bandwidth", "MB/s")):
        sizes = sorted({k[3] for k in cells if k[0] == place and k[2] == bench})
        print(f"\n{bench}, server CPU {place.split('/')[0]}, client CPU {place.split('/')[1]} ({unit}, median of {len(cells[next(iter(cells))])}):\n")
        print("| bytes | " + " | ".join(sets) + " | " + " | ".join(f"{s} / {sets[0]}" for s in sets[1:]) + " |")
        print("|---" * (2 * len(sets)) + "|")
        for size in sizes:
            med = [statistics.median(cells[(place, i, bench, size)]) if cells.get((place, i, bench, size)) else None
                   for i in range(len(sets))]
            ratios = [f"{m / med[0]:.2f}" if m and med[0] else "-" for m in med[1:]]
            print(f"| {size} | " + " | ".join(f"{m:.1f}" if m else "-" for m in med) + " | " + " | ".join(ratios) + " |")
PY
