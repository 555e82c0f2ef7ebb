#!/usr/bin/env bash
# Runs the TCP floor and the three gRPC floors (async generic, protobuf async, protobuf unary)
# over loopback and
# collects JSON Lines.
#
#   bench/floors/run_floors.sh [BUILD_DIR=build] [OUT=floors.jsonl]
#   SERVER_CPU=0 CLIENT_CPU=1 bench/floors/run_floors.sh build out.jsonl
#
# Env: SERVER_CPU / CLIENT_CPU (--cpu lists, unset = unpinned),
#      CLIENT_TIMEOUT (seconds per client run, default 300),
#      FLOOR_ARGS (extra client flags, e.g. "--iterations=100" for a smoke run),
#      FLOORS (which: any of tcp generic async unary; default all),
#      PINGPONG_SIZES / STREAM_SIZES (default "32 64K 1M 4M" / "1M 4M"; an entry SIZE:N also
#      sets its --iterations=N).
# OUT is truncated first; the table output goes to stdout.
set -euo pipefail

build=${1:-build}
out=${2:-floors.jsonl}
client_timeout=${CLIENT_TIMEOUT:-300}
read -r -a extra <<<"${FLOOR_ARGS:-}"
server_pin=()
client_pin=()
[[ -n "${SERVER_CPU:-}" ]] && server_pin=(--cpu="$SERVER_CPU")
[[ -n "${CLIENT_CPU:-}" ]] && client_pin=(--cpu="$CLIENT_CPU")

for bin in psbench-floor-tcp psbench-floor-grpc; do
  if [[ ! -x "$build/bin/$bin" ]]; then
    echo "run_floors.sh: $build/bin/$bin not found; build it first" >&2
    exit 2
  fi
done

tmp=$(mktemp -d)
server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap 'stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Starts a server on port 0 and sets $port from its "listening on" line.
start_server() {
  local bin=$1 api=("${@:2}")
  : >"$tmp/$bin.out"
  "$build/bin/$bin" "${api[@]}" --server --port=0 "${server_pin[@]}" >"$tmp/$bin.out" 2>"$tmp/$bin.err" &
  server_pid=$!
  local line=""
  for _ in $(seq 100); do
    line=$(head -n 1 "$tmp/$bin.out" 2>/dev/null || true)
    [[ -n "$line" ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [[ ! "$line" =~ ^listening\ on\ 127\.0\.0\.1:([0-9]+)$ ]]; then
    echo "run_floors.sh: $bin server did not start: ${line:-no output}" >&2
    cat "$tmp/$bin.err" >&2
    exit 1
  fi
  port=${BASH_REMATCH[1]}
}

: >"$out"
failed=0
run_client() {
  local bin=$1 test=$2 entry=$3 api=("${@:4}")
  local size=${entry%%:*} iterations=()
  [[ "$entry" == *:* ]] && iterations=(--iterations="${entry#*:}")
  if ! timeout "$client_timeout" "$build/bin/$bin" "${api[@]}" --connect="127.0.0.1:$port" --test="$test" \
      --size="$size" "${iterations[@]}" --json="$out" "${client_pin[@]}" "${extra[@]}"; then
    echo "run_floors.sh: $bin ${api[*]} --test=$test --size=$size failed" >&2
    failed=1
  fi
}
read -r -a pingpong_sizes <<<"${PINGPONG_SIZES:-32 64K 1M 4M}"
read -r -a stream_sizes <<<"${STREAM_SIZES:-1M 4M}"
declare -A floor_cmd=([tcp]="psbench-floor-tcp" [generic]="psbench-floor-grpc --api=generic"
                      [async]="psbench-floor-grpc --api=async" [unary]="psbench-floor-grpc --api=unary")
read -r -a floors <<<"${FLOORS:-tcp generic async unary}"
for f in "${floors[@]}"; do
  case $f in
    tcp | generic | async | unary) ;;
    *) echo "run_floors.sh: FLOORS: unknown floor '$f' (tcp, generic, async, unary)" >&2; exit 2 ;;
  esac
done

echo "# run_floors.sh: server cpu ${SERVER_CPU:-any}, client cpu ${CLIENT_CPU:-any}, $(nproc) cpus"
# One server at a time so an idle one never competes for the cores.
for f in "${floors[@]}"; do
  read -r -a words <<<"${floor_cmd[$f]}"
  start_server "${words[@]}"
  for size in "${pingpong_sizes[@]}"; do run_client "${words[0]}" pingpong "$size" "${words[@]:1}"; done
  for size in "${stream_sizes[@]}"; do run_client "${words[0]}" stream "$size" "${words[@]:1}"; done
  stop_server
done
echo "# wrote $(wc -l <"$out") records to $out"
exit "$failed"
