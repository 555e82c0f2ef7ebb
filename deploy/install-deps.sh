#!/usr/bin/env bash
# Installs every Debian 12 package psbench needs to build, run and test.
# Idempotent; run as root (or via sudo). Nothing is fetched outside apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates ccache
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc
  libprotobuf-dev protobuf-compiler
  libabsl-dev nlohmann-json3-dev libfmt-dev libxxhash-dev
  libgtest-dev libgmock-dev
  procps iproute2 python3
  # grpc+verbs: libibverbs (rdma-core) and its user-space providers (rxe, mlx5, ...).
  libibverbs-dev ibverbs-providers ibverbs-utils perftest
  # The Soft-RoCE test guest (tests/rdma/guest): qemu boots Debian's own kernel, debootstrap
  # builds its root filesystem, zstd/cpio pack it, kmod resolves the modules it needs.
  qemu-system-x86 debootstrap zstd cpio kmod
  # MPI (Open MPI): the raw MPI floor, and grpc+mpi.
  libopenmpi-dev openmpi-bin
  # The embedded trainer's CPU engine: oneDNN (its CMake config wants the OpenCL loader).
  libdnnl-dev ocl-icd-opencl-dev
  # Cluster launchers and their tests: a one-node Slurm cluster (slurmctld, slurmd, munge),
  # ssh host lists against a real sshd, TLS certificates made by the tests.
  slurm-wlm slurm-client munge openssh-server openssh-client openssl
  # psbench report: plots (matplotlib), and the headless browser that checks the page.
  python3-matplotlib chromium
  # The interop test (tests/interop): a client and a PS in Python, from docs/protocol.md.
  python3-grpcio python3-protobuf python3-xxhash
  # Fuzz targets (tests/fuzz, -DPSBENCH_FUZZ=ON) and the ASan tree: clang, its libFuzzer
  # runtime, and LLVM's OpenMP (the trainer's oneDNN engine built with clang).
  clang libclang-rt-14-dev libomp-dev
  # Trace capture from PyTorch (tools/psbench_trace) and its test; the PyTorch peers of
  # bench/trainer/compare.sh and bench/pytorch_ps/compare.sh.
  python3-torch python3-torchvision
)

# --pytorch adds OpenBLAS for the PyTorch peers: PyTorch's BLAS is whatever libblas.so.3 is,
# and OpenBLAS, not the reference BLAS, makes a fair race.
if [ "${1:-}" = "--pytorch" ]; then
  packages+=(libopenblas0-pthread)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
