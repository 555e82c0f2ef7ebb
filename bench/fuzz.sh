#!/usr/bin/env bash
# Long fuzzing runs: builds the fuzz targets with clang (libFuzzer, ASan, UBSan) in
# their own build directory if needed, then runs every target SECONDS (default 300) one after
# the other on a copy of its seed corpus. Figures: bench/RESULTS.md, "Fuzzing".
#   bench/fuzz.sh [SECONDS_PER_TARGET] [OUT_DIR]
# BUILD_DIR (default /tmp/psbench-fuzz-build) is where the fuzz build goes; JOBS (default 2)
# its parallelism. PSBENCH_FUZZ_TARGETS and PSBENCH_FUZZ_RUNS pass to run_fuzzers.sh.
# A finding: exit 1 and the file that reproduces it ($BUILD_DIR/fuzz/<target> FILE).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-300}
out=${2:-/tmp/psbench-fuzz-out}
build=${BUILD_DIR:-/tmp/psbench-fuzz-build}
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DPSBENCH_FUZZ=ON \
    -DPSBENCH_TRAINER=OFF -DPSBENCH_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" --target psbench_fuzzers -j "${JOBS:-2}"
exec "$root/tests/fuzz/run_fuzzers.sh" "$build" "$seconds" "$out"
