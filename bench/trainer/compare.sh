#!/usr/bin/env bash
# psbench's trainer (oneDNN, blocked layouts) against PyTorch on the same CPU: same model,
# batch and thread count, forward and forward+backward images/s. Alternates the two per
# configuration so drift on a shared machine hits both. Needs python3-torch and
# python3-torchvision (deploy/install-deps.sh --pytorch).
#   bench/trainer/compare.sh [BUILD_DIR] [OUT.jsonl]
# PyTorch runs twice per configuration: its default layout (NCHW) and channels_last; the
# table takes its faster one.
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
    for layout in "" --channels-last; do
      "${PYTHON:-/usr/bin/python3}" "$here/pytorch_time.py" --model="$model" --batch="$batch" --threads="$threads" \
        --iterations="$iterations" --warmup="$warmup" $layout >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["model"], r["batch"])
    name = "psbench" if r["kind"] == "train_timing" else "pytorch_cl" if r.get("channels_last") else "pytorch"
    rows.setdefault(key, {})[name] = r
print(f"{'model':<11} {'batch':>5} {'pass':<17} {'psbench img/s':>14} {'PyTorch NCHW':>13} {'PyTorch CL':>11} "
      f"{'ratio to best':>14} {'psbench % peak':>15}")
for (model, batch), r in rows.items():
    if "psbench" not in r or "pytorch" not in r or "pytorch_cl" not in r:
        continue
    for p in ("forward", "forward_backward"):
        a = r["psbench"][p]["images_per_s"]
        b, c = r["pytorch"][p]["images_per_s"], r["pytorch_cl"][p]["images_per_s"]
        print(f"{model:<11} {batch:>5} {p:<17} {a:>14.2f} {b:>13.2f} {c:>11.2f} {a / max(b, c):>14.2f} "
              f"{100 * r['psbench'][p]['fraction_of_peak']:>14.1f}%")
PY
