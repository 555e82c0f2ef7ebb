#!/usr/bin/env bash
# Runs every psbench fuzz target for SECONDS each, one after the other, on a copy of its seed
# corpus (tests/fuzz/corpus/<target>/; the repository's copy is never written).
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS_PER_TARGET [OUT_DIR]
# BUILD_DIR is a build configured with -DPSBENCH_FUZZ=ON (binaries in BUILD_DIR/fuzz/).
# OUT_DIR (default: a new temporary directory) gets per target its working corpus
# (corpus/<target>/), libFuzzer's log (<target>.log) and any crash file (crashes/<target>/).
# PSBENCH_FUZZ_TARGETS="a b" runs only those; PSBENCH_FUZZ_RUNS=N also stops a target after
# N executions. Prints one line per target with its executions; exits 1 if any target found
# a crash, leak or timeout (the line names the file that reproduces it) or ran no input at
# all, 2 on usage errors.
set -uo pipefail

# All in a function, read whole before it runs: an edit to this file during a run cannot
# change what the run does.
main() {

usage() { echo "usage: $0 BUILD_DIR SECONDS_PER_TARGET [OUT_DIR]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
build=$1
seconds=$2
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "$0: SECONDS_PER_TARGET must be a positive integer" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/fuzz"
[ -d "$bin" ] || { echo "$0: no $bin: configure BUILD_DIR with -DPSBENCH_FUZZ=ON and build target psbench_fuzzers" >&2; exit 2; }
out=${3:-$(mktemp -d "${TMPDIR:-/tmp}/psbench-fuzz.XXXXXX")}
mkdir -p "$out" || exit 2

# UBSan findings with their stack (the build makes every finding fatal).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
targets=${PSBENCH_FUZZ_TARGETS:-$(cd "$here" && ls *_fuzz.cc | sed 's/\.cc$//')}
runs=()
[ -n "${PSBENCH_FUZZ_RUNS:-}" ] && runs=(-runs="$PSBENCH_FUZZ_RUNS")
failed=0
total_execs=0
for t in $targets; do
  exe="$bin/$t"
  if [ ! -x "$exe" ]; then
    echo "$t: FAILED: $exe is missing (build target psbench_fuzzers)"
    failed=1
    continue
  fi
  corpus="$out/corpus/$t"
  crashes="$out/crashes/$t"
  rm -rf "$crashes"  # findings of an earlier run in OUT_DIR are not this run's
  mkdir -p "$corpus" "$crashes"
  [ -d "$here/corpus/$t" ] && cp -n "$here/corpus/$t"/* "$corpus"/ 2>/dev/null
  chmod -R u+w "$corpus"
  dict=()
  [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  log="$out/$t.log"
  start=$(date +%s)
  # Leak checks stay on; a slow input (over 10 s) or one over 2 GiB counts as a finding too.
  "$exe" "$corpus" "${dict[@]}" "${runs[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$crashes/" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  files=$(ls "$corpus" | wc -l)
  artifact=$(ls "$crashes" 2>/dev/null | head -1)
  if [ "$rc" -eq 0 ] && [ -z "$artifact" ] && [ "${execs:-0}" -eq 0 ]; then
    # A target that ran no input checked nothing: as much a failure as a crash.
    echo "$t: FAILED: it ran no input in ${elapsed}s (log: $log)"
    failed=1
  elif [ "$rc" -ne 0 ] || [ -n "$artifact" ]; then
    reason=$(grep -m1 -E '^==[0-9]+==ERROR|runtime error|fuzz property failed|^SUMMARY' "$log")
    echo "$t: FAILED (exit $rc) after ${execs:-?} executions in ${elapsed}s: ${reason:-see $log}"
    echo "$t:   reproduce: $exe ${artifact:+$crashes/$artifact}   (log: $log)"
    failed=1
  else
    echo "$t: ${execs:-?} executions in ${elapsed}s, no crash (corpus: $files files)"
    total_execs=$(( total_execs + ${execs:-0} ))
  fi
done
echo "run_fuzzers: $total_execs executions in all; corpora and logs in $out"
exit $failed
}

main "$@"
