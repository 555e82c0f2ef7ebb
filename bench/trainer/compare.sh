#!/usr/bin/env bash
# psbench's trainer (oneDNN, blocked layouts) against PyTorch on the same CPU: same model,
# batch and thread count, forward and forward+backward images/s. Alternates the two per
# configuration so drift on a shared machine hits both. Needs python3-torch and
# python3-torchvision (deploy/install-deps.sh --pytorch).
#   bench/trainer/compare.sh [BUILD_DIR] [OUT.jsonl]
# Environment: MODELS ("alexnet vgg11 inception3"), BATCHES ("16 32"), THREADS (all cores),
# ITERATIONS (5), WARMUP (2), PYTHON (/usr/bin/python3: the one Debian's torch is built for).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
out=${2:-/tmp/psbench-trainer-compare.jsonl}
models=${MODELS:-alexnet vgg11 inception3}
batches=${BATCHES:-16 32}
threads=${THREADS:-$(nproc)}
iterations=${ITERATIONS:-5}
warmup=${WARMUP:-2}
: > "$out"
for model in $models; do
  for batch in $batches; do
    "$build/bin/psbench" train --model="$model" --batch="$batch" --threads="$threads" \
      --steps="$iterations" --warmup-steps="$warmup" --json="$out" > /dev/null
    "${PYTHON:-/usr/bin/python3}" "$here/pytorch_time.py" --model="$model" --batch="$batch" --threads="$threads" \
      --iterations="$iterations" --warmup="$warmup" >> "$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["model"], r["batch"])
    rows.setdefault(key, {})["psbench" if r["kind"] == "train_timing" else "pytorch"] = r
print(f"{'model':<11} {'batch':>5} {'pass':<17} {'psbench img/s':>14} {'PyTorch img/s':>14} {'ratio':>6} {'psbench % peak':>15}")
for (model, batch), r in rows.items():
    if "psbench" not in r or "pytorch" not in r:
        continue
    for p in ("forward", "forward_backward"):
        a, b = r["psbench"][p]["images_per_s"], r["pytorch"][p]["images_per_s"]
        print(f"{model:<11} {batch:>5} {p:<17} {a:>14.2f} {b:>14.2f} {a / b:>6.2f} "
              f"{100 * r['psbench'][p]['fraction_of_peak']:>14.1f}%")
PY
