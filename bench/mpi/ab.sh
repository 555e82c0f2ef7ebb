#!/usr/bin/env bash
# Two builds of psbench side by side: `psbench run FLAGS...` from each, alternating, each build
# copied under several path lengths. A binary's path moves the initial stack of every process
# it starts (argv and the environment sit there), and with it the alignment of the hot loops'
# data: on this VM that alone moved the grpc+mpi 32 B round trip by up to 10 %. A difference
# that holds under every copy is the code's, not the layout's.
#
#   bench/mpi/ab.sh OLD_BIN_DIR NEW_BIN_DIR OUT_DIR [FLAGS...]
#   e.g. bench/mpi/ab.sh /tmp/old/bin build/bin /tmp/ab --transport=grpc+mpi \
#          --benchmark=latency --sizes=32:32 --iterations=200000 --warmup-iterations=20000
# Env: ROUNDS (default 2), PADS (extra path characters, default "0 1 4 11 29").
# Writes OUT_DIR/{old,new}.jsonl (the records, in run order) and prints one line per run, each
# build's median p50 (and MB/s), and the median of each new run against the old run before it.
set -euo pipefail
old=$(cd "$1" && pwd -P) new=$(cd "$2" && pwd -P) out=$3
shift 3
rounds=${ROUNDS:-2}
read -r -a pads <<<"${PADS:-0 1 4 11 29}"
mkdir -p "$out"
rm -f "$out/old.jsonl" "$out/new.jsonl"
copies=$(mktemp -d)
trap 'rm -rf "$copies"' EXIT
for pad in "${pads[@]}"; do
  fill=$(printf '%*s' "$pad" '' | tr ' ' x)
  cp -a "$old" "$copies/${fill}old"
  cp -a "$new" "$copies/${fill}new"
done
for ((round = 1; round <= rounds; round++)); do
  for pad in "${pads[@]}"; do
    fill=$(printf '%*s' "$pad" '' | tr ' ' x)
    for build in old new; do
      if ! text=$("$copies/$fill$build/psbench" run "$@" --json="$out/$build.jsonl" 2>&1); then
        echo "bench/mpi/ab.sh: round $round, pad $pad, $build: psbench run failed:" >&2
        tail -n 5 <<<"$text" >&2
        exit 1
      fi
      echo "round $round pad $pad $build: $(grep -E '^ +[0-9]+ ' <<<"$text" | tail -n 1 || true)"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for build in ("old", "new"):
    # One worker record per run (a throughput run's total is left out).
    runs[build] = [r for r in map(json.loads, open(f"{sys.argv[1]}/{build}.jsonl"))
                   if r.get("scope", "worker") == "worker"]
    p50 = [r["latency_us"]["p50"] for r in runs[build] if "latency_us" in r]
    text = f"{build}: {len(runs[build])} runs"
    if p50:
        text += f", median p50 {statistics.median(p50):.3f} us"
    mbs = [r["mb_per_s"] for r in runs[build] if "mb_per_s" in r]
    if mbs:
        text += f", median {statistics.median(mbs):.1f} MB/s"
    print(text)
# Each new run against the old run just before it: drift between runs hits both alike.
pairs = list(zip(runs["old"], runs["new"]))
if all("latency_us" in o and "latency_us" in n for o, n in pairs):
    ratios = sorted(n["latency_us"]["p50"] / o["latency_us"]["p50"] for o, n in pairs)
    print(f"new/old p50, run by run: median {statistics.median(ratios):.3f}, "
          f"{sum(r < 1 for r in ratios)} of {len(ratios)} below 1")
if all("mb_per_s" in o and "mb_per_s" in n for o, n in pairs):
    ratios = sorted(n["mb_per_s"] / o["mb_per_s"] for o, n in pairs)
    print(f"new/old MB/s, run by run: median {statistics.median(ratios):.3f}, "
          f"{sum(r > 1 for r in ratios)} of {len(ratios)} above 1")
PY
