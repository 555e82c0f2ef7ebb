#!/usr/bin/env bash
# Packs what bench/trainer/gpu_run.sh needs for a machine that has a GPU but no psbench build
# (and no package registry): the binaries, stripped, and the shared libraries they load that
# are neither the C/C++ runtime nor CUDA's (that machine has its own CUDA, cuDNN and cuBLAS).
#   bench/trainer/gpu_bundle.sh [BUILD_DIR] [OUT.tar.xz]
# Unpacked, it is bin/ and lib/; gpu_run.sh bin OUT finds lib/ beside bin/.
set -euo pipefail
build=${1:-build}
out=${2:-gpu-bundle.tar.xz}
bins="psbench psbench-ps psbench-worker psbench_trainer_gpu.so trainer_gpu_test"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in $bins; do
  [ -e "$build/bin/$b" ] || { echo "gpu_bundle: $build/bin/$b is missing (built with CUDA and cuDNN?)" >&2; exit 2; }
  strip -o "$stage/bin/$b" "$build/bin/$b"
done
for b in $bins; do ldd "$build/bin/$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
  { grep -v -E 'libcuda|libcudnn|libcublas|libcudart' || true; } |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf "$out" .
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1))"
