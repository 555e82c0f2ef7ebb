#!/usr/bin/env bash
# CPU time per message on each side of a gRPC push stream: psbench (psbench-ps and
# psbench-worker, --benchmark=bandwidth) against the async generic floor
# (psbench-floor-grpc --api=generic, --test=stream), alternating, server on SERVER_CPU and
# client on CLIENT_CPU. Where both sides are near a full core, a message rate says little
# about which side costs more; CPU seconds per message (the kernel's accounting of each whole
# process, start-up included, which is under 1 % here) say it for each.
#
#   bench/grpc_cpu_per_message.sh [BUILD_DIR=build] [SIZE=32] [MESSAGES=300000]
# Env: ROUNDS (default 3), SERVER_CPU (0), CLIENT_CPU (1), WINDOW (16).
# Prints one line per run: messages/s, client and server CPU µs per message.
set -euo pipefail
build=${1:-build} size=${2:-32} n=${3:-300000}
rounds=${ROUNDS:-3} scpu=${SERVER_CPU:-0} ccpu=${CLIENT_CPU:-1} window=${WINDOW:-16}
bin=$(cd "$build/bin" && pwd -P)
tmp=$(mktemp -d)
server=""
trap '[[ -n "$server" ]] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

# Starts SERVER... pinned, sets $server and $port from its "listening on 127.0.0.1:P" line.
start() {
  taskset -c "$scpu" "$@" >"$tmp/server.out" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/server.out")
    [[ -n "$port" ]] && return
    sleep 0.05
  done
  echo "grpc_cpu_per_message.sh: $1 did not start: $(cat "$tmp/server.out")" >&2
  exit 1
}
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }  # utime + stime, in clock ticks
# Prints "NAME RATE CLIENT_US SERVER_US" for the client command just run.
report() {
  local name=$1 rate=$2 before=$3 after
  after=$(cpu_s "$server")
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  read -r user sys <"$tmp/time"
  python3 -c "import sys; n=$n; print('%-8s %10.0f msgs/s  client %6.2f us/msg  server %6.2f us/msg' %
      ('$name', $rate, ($user + $sys) / n * 1e6, ($after - $before) / n * 1e6))"
}

for ((round = 1; round <= rounds; round++)); do
  start "$bin/psbench-floor-grpc" --api=generic --server --port=0
  before=$(cpu_s "$server")
  /usr/bin/time -o "$tmp/time" -f "%U %S" taskset -c "$ccpu" "$bin/psbench-floor-grpc" --api=generic \
    --connect="127.0.0.1:$port" --test=stream --size="$size" --window="$window" --iterations="$n" --warmup=0 \
    >"$tmp/floor.out"
  report floor "$(awk -v s="$size" '$1 == s {print $4}' "$tmp/floor.out")" "$before"

  start "$bin/psbench-ps" --port=0
  before=$(cpu_s "$server")
  /usr/bin/time -o "$tmp/time" -f "%U %S" taskset -c "$ccpu" "$bin/psbench-worker" --ps="127.0.0.1:$port" \
    --benchmark=bandwidth --sizes="$size:$size" --window="$window" --iterations="$n" --warmup-iterations=0 \
    --quiet --json=- >"$tmp/record.json"
  report psbench "$(python3 -c "import json; print(json.loads(open('$tmp/record.json').readline())['msgs_per_s'])")" \
    "$before"
done
