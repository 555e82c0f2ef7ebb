#!/usr/bin/env bash
# The interop test (ctest label interop): a client and a PS written in Python from
# docs/protocol.md alone (tests/interop/*.py, Debian's python3-grpcio, python3-protobuf and
# python3-xxhash; the messages compiled by protoc from proto/psbench.proto).
#   1. The Python client against psbench-ps: echo, push and exchange, both wire modes.
#   2. psbench-worker against the Python PS: latency, bandwidth and throughput, both wire
#      modes, with --validate, each a record of its own.
#
#   run_interop.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
here=$src/tests/interop
# Debian's interpreter, whose packages hold grpc (a python3 earlier on PATH may not).
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psbench-interop.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
        alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "run_interop: $*" >&2; exit 1; }

"$py" -c 'import grpc, google.protobuf, xxhash' 2>/dev/null ||
    fail "Debian's python3-grpcio, python3-protobuf and python3-xxhash are needed (deploy/install-deps.sh)"
protoc --proto_path="$src/proto" --python_out="$tmp" "$src/proto/psbench.proto"

# Starts a PS in the background with its output in $1; sets $address once it listens. Each
# PS ends within 250 s even if this script is killed before its cleanup runs (ctest's
# timeout is 300 s; the steps below are bounded to fit in it).
start_ps() {
    local out=$1
    shift
    timeout -k 5 250 "$@" > "$out" 2>&1 &
    pids+=($!)
    address=""
    for _ in $(seq 1 300); do
        address=$(grep -o 'listening on [0-9.]*:[0-9]*' "$out" | head -1 | cut -d' ' -f3 || true)
        [ -n "$address" ] && break
        kill -0 "${pids[-1]}" 2>/dev/null || fail "the PS exited: $(cat "$out")"
        sleep 0.05
    done
    [ -n "$address" ] || fail "the PS printed no address: $(cat "$out")"
}

echo "== the Python client against psbench-ps"
start_ps "$tmp/psbench-ps.out" "$bin/psbench-ps" --listen=127.0.0.1 --port=0
PYTHONPATH=$here timeout 60 "$py" "$here/client.py" "$tmp" "$address"

echo "== psbench-worker against the Python PS"
start_ps "$tmp/python-ps.out" env PYTHONPATH="$here" "$py" "$here/ps.py" "$tmp"
pyps=$address
json=$tmp/records.jsonl
version=$("$bin/psbench-worker" --version | awk '{print $NF}')
for mode in non-serialized serialized; do
    for benchmark in latency bandwidth throughput; do
        timeout 20 "$bin/psbench-worker" --ps="$pyps" --benchmark=$benchmark --mode=$mode --validate \
            --sizes=1K:64K --warmup-iterations=2 --iterations=20 --quiet --json="$json" 2>"$tmp/worker.err" ||
            fail "psbench-worker --benchmark=$benchmark --mode=$mode against the Python PS failed: $(cat "$tmp/worker.err")"
        # Not psbench's own build: said once per PS, and only that.
        [ "$(cat "$tmp/worker.err")" = "psbench-worker 0: warning: PS $pyps runs version python-interop, this worker psbench $version" ] ||
            fail "psbench-worker's stderr is not the one warning of another build: $(cat "$tmp/worker.err")"
    done
done
"$py" - "$json" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
kinds = {(r["benchmark"], r["mode"]) for r in records}
want = {(b, m) for b in ("latency", "bandwidth", "throughput") for m in ("non-serialized", "serialized")}
assert kinds == want, f"records for {sorted(kinds)}, wanted {sorted(want)}"
for r in records:
    assert r["validate"] is True and r["transport"] == "grpc", r
    assert r["placement"]["ps"][0]["version"] == "python-interop", r["placement"]
    # The PS's own counts of the measured calls agree with the worker's (ps_counted).
    assert r["ps_counted"][0]["rpcs"] > 0 and r["ps_counted"][0]["sessions_lost"] == 0, r["ps_counted"]
    # The PS's own tally (GetInfo's plane and moved) took the record's payload bytes, both ways.
    moved = r["moved"]
    assert moved["agrees"] is True and moved["ps"][0]["plane"] == "grpc", moved
    assert moved["ps"][0]["payload_bytes_received"] == moved["payload_bytes_sent"] > 0, moved
    assert moved["ps"][0]["payload_bytes_sent"] == moved["payload_bytes_received"], moved
print(f"run_interop: {len(records)} records from psbench-worker against the Python PS")
PY
# Two workers meet at the Python PS's barriers.
for w in 0 1; do
    timeout 30 "$bin/psbench-worker" --ps="$pyps" --benchmark=throughput --num-workers=2 --worker-index=$w \
        --warmup-iterations=2 --iterations=20 --quiet --json="$tmp/pair$w.jsonl" &
    workers[$w]=$!
done
for w in 0 1; do
    wait "${workers[$w]}" || fail "worker $w of two against the Python PS failed"
    [ -s "$tmp/pair$w.jsonl" ] || fail "worker $w of two wrote no record"
done
echo "run_interop: two workers met at the Python PS's barriers"

# A method the PS does not serve: the worker's error names the PS and the method.
if out=$(timeout 20 "$bin/psbench-worker" --ps="$pyps" --benchmark=updates --steps=2 --quiet 2>&1); then
    fail "--benchmark=updates against a PS without Exchange succeeded"
fi
grep -q "PS $pyps: /psbench.Raw/Exchange: " <<<"$out" || fail "the error names neither the PS nor the method: $out"
echo "run_interop: a method the PS lacks is named: $out"
# A PS that says another plane carries its payloads: the worker writes its record, then ends
# with one line saying so (exit 1), within its time.
start_ps "$tmp/lying-ps.out" env PYTHONPATH="$here" "$py" "$here/ps.py" "$tmp" $((1 << 30)) rdma
status=0
timeout 20 "$bin/psbench-worker" --ps="$address" --benchmark=latency --sizes=1K:1K --warmup-iterations=2 \
    --iterations=20 --json="$tmp/lying.jsonl" >"$tmp/lying.out" 2>&1 || status=$?
[ $status = 1 ] || fail "a worker against a PS of another plane ended with $status, not 1: $(cat "$tmp/lying.out")"
grep -q "payload bytes not where the record says: PS $address serves its payloads over 'rdma', this worker over 'grpc'" \
    "$tmp/lying.out" || fail "the worker did not name the planes: $(cat "$tmp/lying.out")"
"$py" -c 'import json, sys; r = json.loads(open(sys.argv[1]).readline()); assert r["moved"]["agrees"] is False, r["moved"]' \
    "$tmp/lying.jsonl" || fail "the record does not say the planes disagree"
echo "run_interop: a PS of another plane is refused after the record"
echo "run_interop: PASS"
