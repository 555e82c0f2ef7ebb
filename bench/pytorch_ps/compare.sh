#!/usr/bin/env bash
# The PS step over a trace's gradients (default VGG-11, 531 MB each way): psbench's PS over
# grpc+mpi and grpc against a PS written on PyTorch RPC (torch_rpc_ps.py, TensorPipe), with 1
# and 2 workers, for bench/RESULTS.md. Rounds alternate every configuration so that drift on a
# shared machine hits them alike; the summary takes medians over rounds and sets them against
# the memory-traffic bound of a step (from this machine's measured copy bandwidth).
#
#   bench/pytorch_ps/compare.sh [BUILD_DIR=build] [OUT_DIR=pytorch-ps-out]
# Env: REPEAT (rounds, default 5), STEPS (default 20), WORKERS (default "1 2"),
#      TRACE (default payloads/traces/vgg11.json). Needs python3-torch
#      (deploy/install-deps.sh --pytorch).
set -euo pipefail
build=$(cd "${1:-build}" && pwd -P)
out=${2:-pytorch-ps-out}
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
repeat=${REPEAT:-5}
steps=${STEPS:-20}
workers=${WORKERS:-1 2}
trace=${TRACE:-$repo/payloads/traces/vgg11.json}
python=/usr/bin/python3
[[ -x $python ]] || python=python3
mkdir -p "$out"
rm -f "$out"/*.jsonl "$out/pytorch.log"
cpus=$(nproc)

# PyTorch's own chatter (TensorPipe's log lines) goes to pytorch.log, with any failure.
"$python" "$here/torch_rpc_ps.py" --trace="$trace" --workers=1 --steps=1 --copy-bandwidth \
  2>>"$out/pytorch.log" | grep '"copy_bandwidth"' > "$out/copy.jsonl"
for ((round = 1; round <= repeat; round++)); do
  echo "round $round/$repeat" >&2
  for w in $workers; do
    for threads in $(printf '%s\n' 1 "$cpus" | sort -un); do
      "$python" "$here/torch_rpc_ps.py" --trace="$trace" --workers="$w" --steps="$steps" \
        --threads="$threads" 2>>"$out/pytorch.log" >> "$out/pytorch.jsonl"
    done
    for transport in grpc+mpi grpc; do
      for mode in --async --sync; do
        [[ $transport == grpc && $mode == --sync ]] && continue  # grpc's async is its best
        "$build/bin/psbench" run --transport="$transport" --benchmark=updates --scheme=trace \
          --trace="$trace" --num-workers="$w" --steps="$steps" "$mode" \
          --json="$out/psbench.jsonl" > /dev/null
      done
    done
  done
done
"$python" "$here/summarize.py" "$out"
