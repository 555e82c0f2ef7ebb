#!/usr/bin/env bash
# The GPU engine on a machine with an NVIDIA GPU: the gpu tests, two GPU workers through real
# PS against one worker with the whole batch, `psbench train --engine=gpu` for every model, and
# PyTorch (CUDA) on the same models as the peer. Needs a build's bin/ (or a bundle from
# gpu_bundle.sh, whose lib/ it puts on the library path) and, for the peer, python3 with
# torch and torchvision. Writes a few files to OUT (text logs and JSON Lines).
#   bench/trainer/gpu_run.sh BIN_DIR OUT [env] [tests] [distributed] [timing] [pytorch] [cpu]
# Environment: MODELS (all six), BATCHES ("32 64"), MATHS ("fp32 tf32"), LAYOUTS ("nchw nhwc",
# the GPU engine's --layout), CL_MATHS (MATHS: PyTorch runs NCHW in each math and channels-last
# in these), STEPS (10),
# WARMUP (3), PYTHON (python3), CPU_MODELS ("alexnet resnet50") for the CPU engine's figures.
set -uo pipefail
bin=$(cd "$1" && pwd)
out=$2
shift 2
steps=${*:-env tests distributed timing pytorch}
models=${MODELS:-alexnet overfeat vgg11 vgg16 inception3 resnet50}
batches=${BATCHES:-32 64}
maths=${MATHS:-fp32 tf32}
layouts=${LAYOUTS:-nchw nhwc}
iters=${STEPS:-10}
warmup=${WARMUP:-3}
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# Results are appended to: an earlier run's would mix in.
if [ -n "$(ls -A "$out" 2>/dev/null)" ]; then echo "gpu_run: $out is not empty" >&2; exit 2; fi
mkdir -p "$out"

# cuDNN and cuBLAS: the ones PyTorch's wheels ship where they are installed, so that psbench
# and its peer run the same library (CUDNN=system keeps the system's); otherwise the
# system's, or any found under /usr/local, /opt or /usr/lib.
extra=
if [ "${CUDNN:-torch}" = torch ]; then
  extra=$("$python" -c 'import os, nvidia
dirs = {r for p in nvidia.__path__ for r, _, fs in os.walk(p)
        for f in fs if f.startswith(("libcudnn.so.", "libcublas.so.", "libcublasLt.so."))}
print("".join(":" + d for d in sorted(dirs)))' 2>/dev/null)
fi
for lib in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
  { /sbin/ldconfig -p 2>/dev/null || ldconfig -p; } | grep -q "$lib" && continue
  found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
  [ -n "$found" ] && extra="$extra:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$bin/../lib$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PSBENCH_BIN_DIR="$bin"  # where trainer_gpu_test finds psbench, psbench-ps, psbench-worker

run() {  # run LOG TIMEOUT COMMAND...: appends the command and its output to LOG
  local log=$1 limit=$2
  shift 2
  echo "\$ $*" >> "$out/$log"
  local start=$SECONDS
  # In the background so that a TERM to this script reaches it: timeout puts the command in a
  # process group of its own, which the trap below ends with all its children (a command left
  # running would load the GPU under the next one).
  timeout "$limit" "$@" >> "$out/$log" 2>&1 &
  current=$!
  wait "$current"
  local rc=$?
  current=
  echo "[exit $rc, $((SECONDS - start)) s]" >> "$out/$log"
  return $rc
}
current=
trap '[ -n "$current" ] && kill -TERM -- "-$current" 2>/dev/null; exit 143' TERM INT

for step in $steps; do
  case $step in
    env)
      run env.txt 30 nvidia-smi
      run env.txt 30 nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit --format=csv
      echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$out/env.txt"
      run env.txt 30 ldd "$bin/psbench_trainer_gpu.so"
      [ -n "${SKIP_TORCH_ENV:-}" ] || run env.txt 60 "$python" -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name(0))'
      ;;
    tests)
      run tests.txt 600 "$bin/trainer_gpu_test"
      ;;
    distributed)
      # Two workers of batch 2 must end where one worker of batch 4 does (as on the CPU).
      common=(--trainer=tiny --engine=gpu --num-ps=2 --steps=20 --warmup-steps=0 --learning-rate=0.01 --sync)
      run distributed.txt 300 "$bin/psbench" run "${common[@]}" --num-workers=1 --batch=4 --json="$out/distributed.jsonl"
      run distributed.txt 300 "$bin/psbench" run "${common[@]}" --num-workers=2 --batch=2 --json="$out/distributed.jsonl"
      # A real model through the PS: what staging gradients through host memory costs.
      run distributed.txt 300 "$bin/psbench" run --trainer=vgg16 --engine=gpu --math=tf32 --batch=64 --num-ps=1 \
        --num-workers=1 --steps=5 --warmup-steps=2 --json="$out/distributed.jsonl"
      ;;
    timing)
      for model in $models; do for batch in $batches; do for math in $maths; do for layout in $layouts; do
        run timing.txt 300 "$bin/psbench" train --model="$model" --batch="$batch" --engine=gpu --math="$math" \
          --layout="$layout" --steps="$iters" --warmup-steps="$warmup" --json="$out/timing.jsonl"
      done; done; done; done
      ;;
    pytorch)
      # torchvision has no OverFeat. NCHW and channels-last in each math.
      tv=$(echo $models | tr ' ' '\n' | grep -v overfeat | paste -sd,)
      run pytorch.txt 900 "$python" "$here/pytorch_time.py" --device=cuda --model="$tv" \
        --batch="$(echo $batches | tr ' ' ,)" --math="$(echo $maths | tr ' ' ,)" \
        --iterations="$iters" --warmup="$warmup"
      run pytorch.txt 900 "$python" "$here/pytorch_time.py" --device=cuda --channels-last --model="$tv" \
        --batch="$(echo $batches | tr ' ' ,)" --math="$(echo ${CL_MATHS:-$maths} | tr ' ' ,)" --iterations="$iters" --warmup="$warmup"
      grep '^{' "$out/pytorch.txt" > "$out/pytorch.jsonl"
      ;;
    cpu)
      for model in ${CPU_MODELS:-alexnet resnet50}; do for batch in $batches; do
        run cpu.txt 300 "$bin/psbench" train --model="$model" --batch="$batch" --engine=cpu \
          --steps=3 --warmup-steps=1 --json="$out/cpu.jsonl"
      done; done
      ;;
    *) echo "gpu_run: unknown step '$step'" >&2; exit 2 ;;
  esac
done
