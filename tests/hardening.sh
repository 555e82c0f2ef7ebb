#!/usr/bin/env bash
# The hardening half of the test command (README, .ci/run): the suites again under sanitizers,
# each in its own build directory, then every fuzz target briefly.
#
#   tests/hardening.sh [asan] [tsan] [fuzz]     (default: all three, in that order)
#
#   asan  build-asan/ (clang), -DPSBENCH_SANITIZE=address,undefined: ctest -L 'unit|integration',
#         and the trainer's tests on small shapes (every layer's gradient check, the broken
#         engines, learning a synthetic task)
#   tsan  build-tsan/, -DPSBENCH_SANITIZE=thread: the tests that run the threaded transport
#         code (in-process gRPC PS and client, and the real binaries end to end)
#   fuzz  the libFuzzer targets of that same build-asan/ tree (-DPSBENCH_FUZZ=ON: one ASan
#         tree compiles the code once for both): every target on its seed corpus,
#         PSBENCH_FUZZ_SECONDS each (default 5); bench/fuzz.sh is the long run
#
# The ASan tree builds the trainer's CPU engine (oneDNN and its OpenMP runtime are not
# instrumented, psbench's code around them is) and no GPU engine; the TSan tree no trainer
# (OpenMP's threads are invisible to it). A finding stops the process that made it
# (-fno-sanitize-recover=all), so the test that ran it fails and prints the report.
# Environment: PSBENCH_HARDENING_JOBS (ctest -j, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUPP=$ROOT/tests/sanitizers
JOBS=${PSBENCH_HARDENING_JOBS:-2}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(asan tsan fuzz)
for s in "${steps[@]}"; do
    case $s in asan|tsan|fuzz) ;; *) echo "tests/hardening.sh: unknown step '$s' (asan, tsan, fuzz)" >&2; exit 2 ;; esac
done

TRAINER_SMALL='^(GradientTest|Faults/BrokenEngineTest|BrokenEngineTest|LearningTest)\.'

say() { printf '\n== hardening: %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

# Every sanitizer report names the test binary and stops it; symbolized stacks need
# llvm-symbolizer, which clang's packages put on PATH under a versioned name.
for s in /usr/bin/llvm-symbolizer /usr/lib/llvm-14/bin/llvm-symbolizer; do
    [ -x "$s" ] && export ASAN_SYMBOLIZER_PATH=$s && break
done
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp"
export TSAN_OPTIONS="suppressions=$SUPP/tsan.supp:second_deadlock_stack=1:halt_on_error=1:exitcode=66:print_suppressions=0"

# clang: libFuzzer needs it, and it compiles ASan code about twice as fast as gcc.
configure_asan() {
    # The compilers as cache variables: a tree configured earlier with gcc is reconfigured.
    cmake -S . -B build-asan -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
        -DPSBENCH_SANITIZE=address,undefined -DPSBENCH_FUZZ=ON -DPSBENCH_TRAINER=ON -DPSBENCH_CUDA=OFF
}

run_asan() {
    say "AddressSanitizer + UndefinedBehaviorSanitizer: unit and integration"
    configure_asan
    cmake --build build-asan --target psbench_sanitized_suite
    ctest --test-dir build-asan -L '^(unit|integration)$' -j "$JOBS" --output-on-failure
    # The trainer on small shapes (the six real models at full size are the normal build's).
    ctest --test-dir build-asan -L '^trainer$' -R "$TRAINER_SMALL" -j "$JOBS" --output-on-failure --no-tests=error
}

# The threaded transport code: gRPC client and server in one process (exchange_test), the
# transport's unit tests, and the binaries (every PS serving thread, the worker's completion
# loop) end to end, with faults.
run_tsan() {
    say "ThreadSanitizer: the transports"
    cmake -S . -B build-tsan -G Ninja -DPSBENCH_SANITIZE=thread -DPSBENCH_TRAINER=OFF
    cmake --build build-tsan --target psbench_tsan_suite
    ctest --test-dir build-tsan -j "$JOBS" --output-on-failure -R "$(tsan_test_regex)"
}

# The CTest names (Suite.Case, from gtest_discover_tests) of the tests of the executables
# psbench_tsan_suite builds (tests/CMakeLists.txt lists them): the others are not built.
tsan_test_regex() {
    local suites=() bin t
    for t in $(tr ';' ' ' < build-tsan/psbench_tsan_tests.txt); do
        bin=build-tsan/bin/$t
        [ -x "$bin" ] || { echo "tests/hardening.sh: $bin was not built" >&2; exit 1; }
        mapfile -t -O "${#suites[@]}" suites < <("$bin" --gtest_list_tests | grep -v '^ ' | sed 's/\..*//')
    done
    (IFS='|'; echo "^(${suites[*]})\\.")
}

run_fuzz() {
    say "libFuzzer: every target, ${PSBENCH_FUZZ_SECONDS:-5} s each"
    configure_asan
    cmake --build build-asan --target psbench_fuzzers
    # Working corpora and logs stay in the build tree (nothing left in /tmp).
    tests/fuzz/run_fuzzers.sh build-asan "${PSBENCH_FUZZ_SECONDS:-5}" build-asan/fuzz-run
}

for s in "${steps[@]}"; do "run_$s"; done
say "done"
