#!/usr/bin/env bash
# After `ctest`: did every suite run? A suite can be lost two ways without a test failing:
# CMake did not find its dependency (MPI, libibverbs, oneDNN, Slurm, PyTorch), so its label
# has no tests; or a test skipped at run time. This prints both. Under CI (CI=true, as
# .ci/run sets it) either one fails the run: exit 1. A user's build only gets the list.
#   tests/check_suites.sh BUILD_DIR
# Skips that are allowed, because the machine cannot have what they need:
#   - label gpu, where the machine has no NVIDIA GPU (no /dev/nvidia0, no
#     /proc/driver/nvidia/gpus/*): with one, a GPU test that skips is a failure;
#   - NetnsTest.LatencySeesALinksDelay, where the kernel has no sch_netem ("no netem:");
#   - the cases of a verbs PS without an RDMA device, on a host that has one;
#   - MemoryCgroupTest, where no memory cgroup can be made ("no writable memory cgroup:"):
#     not root, or no cgroup memory controller this script can make a cgroup in either.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$1
log=$build/Testing/Temporary/LastTest.log
[ -f "$log" ] || { echo "check_suites: no $log: run ctest in $build first" >&2; exit 2; }
strict=0
[ "${CI:-}" = true ] && strict=1
# `ctest -N` below rewrites LastTest.log: read the run's copy, and put it back at the end.
saved=$(mktemp)
cp -p "$log" "$saved"
trap 'cp -p "$saved" "$log"; rm -f "$saved"' EXIT

# Labels and the dependency that brings each one's tests.
declare -A needs=(
  [unit]="the build itself" [integration]="the build itself" [faults]="the build itself"
  [report]="the build itself" [docs]="the build itself" [interop]="the build itself"
  [netns]="the build itself" [ssh]="the build itself"
  [trainer]="oneDNN and OpenMP (libdnnl-dev)" [gpu]="the trainer (oneDNN)"
  [mpi]="an MPI (libopenmpi-dev)" [rdma]="libibverbs (libibverbs-dev)"
  [slurm]="slurmctld, slurmd, munged and sbatch (slurm-wlm, munge)"
  [trace]="PyTorch for /usr/bin/python3 (python3-torch)"
)
problems=0
for label in $(printf '%s\n' "${!needs[@]}" | sort); do
  count=$(ctest --test-dir "$build" -N -L "^${label}\$" 2>/dev/null | sed -n 's/^Total Tests: //p')
  if [ "${count:-0}" -eq 0 ]; then
    echo "check_suites: label $label has no tests: CMake did not find ${needs[$label]}"
    problems=$((problems + 1))
  fi
done

# Whether this machine lets root make a memory cgroup (the probe is removed at once).
cgroup_writable=0
if [ "$(id -u)" -eq 0 ]; then
  for base in /sys/fs/cgroup/memory /sys/fs/cgroup /sys/fs/cgroup/unified; do
    probe=$base/psbench-check-$$
    [ -e "$base/cgroup.procs" ] && mkdir "$probe" 2>/dev/null || continue
    if [ -e "$probe/memory.limit_in_bytes" ] || [ -e "$probe/memory.max" ]; then cgroup_writable=1; fi
    rmdir "$probe"
  done
fi

gpu_present=0
if [ -e /dev/nvidia0 ] || compgen -G "/proc/driver/nvidia/gpus/*" > /dev/null; then gpu_present=1; fi

# The skipped tests of the last ctest run, with the reason each printed.
if ! skips=$(python3 - "$saved" "$build" <<'EOF'
import re, subprocess, sys
log, build = sys.argv[1], sys.argv[2]
gpu_tests = set(subprocess.run(["ctest", "--test-dir", build, "-N", "-L", "^gpu$"], capture_output=True,
                               text=True).stdout.splitlines())
gpu_names = {m.group(1) for line in gpu_tests for m in [re.match(r"\s*Test\s+#\d+: (.*)$", line)] if m}
name, out = None, []
def flush():
    text = "\n".join(out)
    if name and "Skip regular expression found in output" in text:
        m = re.search(r": Skipped\n(.*)", text)
        reason = m.group(1).strip() if m else "?"
        print(f"{'gpu' if name in gpu_names else '-'}\t{name}\t{reason}")
for line in open(log, errors="replace"):
    m = re.match(r"^\d+/\d+ Testing: (.*)$", line.rstrip("\n"))
    if m:
        flush()
        name, out = m.group(1), []
    else:
        out.append(line.rstrip("\n"))
flush()
EOF
); then
  echo "check_suites: could not read the skipped tests from $log" >&2
  exit 2
fi
while IFS=$'\t' read -r kind name reason; do
  [ -n "$name" ] || continue
  short=${name%%  #*}
  if [ "$kind" = gpu ] && [ "$gpu_present" -eq 0 ]; then continue; fi
  if [ "$short" = NetnsTest.LatencySeesALinksDelay ] && [[ "$reason" == "no netem:"* ]]; then continue; fi
  # The no-device cases of grpc+verbs, on a host that has one (its own tests then run there).
  if [[ "$reason" == "this host has an RDMA device"* ]]; then continue; fi
  if [[ "$short" == MemoryCgroupTest.* && "$reason" == "no writable memory cgroup:"* && $cgroup_writable -eq 0 ]]; then
    continue
  fi
  echo "check_suites: $short skipped: $reason"
  problems=$((problems + 1))
done <<< "$skips"

if [ "$problems" -eq 0 ]; then
  echo "check_suites: every label has tests; no test skipped but those allowed"
  exit 0
fi
if [ "$strict" -eq 1 ]; then
  echo "check_suites: $problems suite(s) lost: CI fails (install what is missing: deploy/install-deps.sh)"
  exit 1
fi
echo "check_suites: $problems suite(s) did not run here (CI would fail)"
exit 0
