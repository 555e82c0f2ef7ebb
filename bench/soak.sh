#!/usr/bin/env bash
# Soak: many concurrent worker streams against one PS over gRPC for a long time. Passes when
# every worker finishes without an error and the PS's resident memory stays flat after the
# warm-up (a leak per request, a growing queue or a buffer pool that never shrinks shows
# up here long before it would on a cluster).
#
#   bench/soak.sh [--bin=build/bin] [--workers=64] [--outstanding=1] [--duration=600]
#                 [--warmup=60] [--mode=non-serialized] [--out=DIR] [-- WORKER_FLAGS...]
#
# Streams = workers x outstanding (default 64 x 1: 64 worker processes, each with its own
# gRPC channel and session on the PS). Every --sample seconds (default 10) it records the
# PS's VmRSS, threads and open files in OUT/samples.tsv; the workers' records go to
# OUT/workers.jsonl and the verdict to OUT/summary.json. "Flat" means the RSS at the end is
# within --rss-slack-mib (default 16) or 5 % of the RSS at the end of the warm-up, whichever
# is larger. Exit 0 pass, 1 fail, 2 usage.
set -euo pipefail

BIN=build/bin WORKERS=64 OUTSTANDING=1 DURATION=600 WARMUP=60 SAMPLE=10 MODE=non-serialized
SLACK_MIB=16 OUT=
EXTRA=()
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --bin=*) BIN=${1#*=} ;;
        --workers=*) WORKERS=${1#*=} ;;
        --outstanding=*) OUTSTANDING=${1#*=} ;;
        --duration=*) DURATION=${1#*=} ;;
        --warmup=*) WARMUP=${1#*=} ;;
        --sample=*) SAMPLE=${1#*=} ;;
        --mode=*) MODE=${1#*=} ;;
        --rss-slack-mib=*) SLACK_MIB=${1#*=} ;;
        --out=*) OUT=${1#*=} ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) usage ;;
        *) echo "bench/soak.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
for v in WORKERS OUTSTANDING DURATION WARMUP SAMPLE SLACK_MIB; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench/soak.sh: --${v,,} must be a positive integer, got '${!v}'" >&2; exit 2; }
done
[ "$WARMUP" -lt "$DURATION" ] || { echo "bench/soak.sh: --warmup ($WARMUP s) must be shorter than --duration ($DURATION s)" >&2; exit 2; }
for b in psbench-ps psbench-worker; do
    [ -x "$BIN/$b" ] || { echo "bench/soak.sh: $BIN/$b not found (build first, or --bin=DIR)" >&2; exit 2; }
done
OUT=${OUT:-$(mktemp -d /tmp/psbench-soak.XXXXXX)}
mkdir -p "$OUT"
: > "$OUT/workers.jsonl"

PS_PID= WORKER_PIDS=()
cleanup() {
    for p in "${WORKER_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    [ -n "$PS_PID" ] && kill -TERM "$PS_PID" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The PS serves as many threads as the machine has cores, as a soak on a server would.
"$BIN/psbench-ps" --port=0 --threads="$(nproc)" > "$OUT/ps.out" 2> "$OUT/ps.err" &
PS_PID=$!
for _ in $(seq 100); do
    grep -q 'listening on' "$OUT/ps.out" 2>/dev/null && break
    kill -0 "$PS_PID" 2>/dev/null || { echo "bench/soak.sh: the PS exited: $(cat "$OUT/ps.err")" >&2; exit 1; }
    sleep 0.1
done
ADDR=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$OUT/ps.out" | head -1)
[ -n "$ADDR" ] || { echo "bench/soak.sh: the PS printed no address" >&2; exit 1; }
echo "soak: PS $ADDR (pid $PS_PID), $WORKERS workers x $OUTSTANDING outstanding = $((WORKERS * OUTSTANDING)) streams, ${DURATION} s, warm-up ${WARMUP} s, $MODE; out $OUT"

for i in $(seq 0 $((WORKERS - 1))); do
    "$BIN/psbench-worker" --ps="$ADDR" --benchmark=throughput --mode="$MODE" \
        --num-workers="$WORKERS" --worker-index="$i" --run-id=soak \
        --outstanding="$OUTSTANDING" --duration="${DURATION}s" --warmup=0s --quiet \
        --connect-timeout=60s --json="$OUT/worker-$i.jsonl" "${EXTRA[@]}" \
        > "$OUT/worker-$i.out" 2> "$OUT/worker-$i.err" &
    WORKER_PIDS+=($!)
done

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$PS_PID/status" 2>/dev/null || echo 0; }
printf 't_s\tps_rss_kib\tps_threads\tps_fds\n' > "$OUT/samples.tsv"
start=$(date +%s)
while :; do
    alive=0
    for p in "${WORKER_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    now=$(( $(date +%s) - start ))
    printf '%d\t%d\t%d\t%d\n' "$now" "$(rss_kib)" \
        "$(awk '/^Threads:/ {print $2}' "/proc/$PS_PID/status" 2>/dev/null || echo 0)" \
        "$(ls "/proc/$PS_PID/fd" 2>/dev/null | wc -l)" >> "$OUT/samples.tsv"
    [ "$alive" -eq 0 ] && break
    if [ "$now" -gt $((DURATION + 180)) ]; then
        echo "soak: FAIL: $alive workers still running $((now - DURATION)) s after the end" >&2
        exit 1
    fi
    sleep "$SAMPLE"
done

failed=0
for i in "${!WORKER_PIDS[@]}"; do
    if ! wait "${WORKER_PIDS[$i]}"; then
        failed=$((failed + 1))
        echo "soak: worker $i failed: $(head -c 300 "$OUT/worker-$i.err")" >&2
    fi
    cat "$OUT/worker-$i.jsonl" >> "$OUT/workers.jsonl" 2>/dev/null || true
done
WORKER_PIDS=()
ps_alive=1; kill -0 "$PS_PID" 2>/dev/null || ps_alive=0

python3 - "$OUT" "$WARMUP" "$SLACK_MIB" "$failed" "$ps_alive" "$WORKERS" "$OUTSTANDING" "$DURATION" "$MODE" <<'EOF'
import json, sys
out, warmup, slack_mib, failed, ps_alive, workers, outstanding, duration, mode = sys.argv[1:]
warmup, slack_mib, failed, workers = int(warmup), int(slack_mib), int(failed), int(workers)
rows = [l.split('\t') for l in open(f'{out}/samples.tsv').read().split('\n')[1:] if l]
samples = [(int(t), int(r), int(th), int(fd)) for t, r, th, fd in rows]
records = [json.loads(l) for l in open(f'{out}/workers.jsonl') if l.strip()]
after = [s for s in samples if s[0] >= warmup and s[1] > 0]
warm = after[0][1] if after else 0
end = after[-1][1] if after else 0
peak = max((s[1] for s in after), default=0)
# Least-squares slope of RSS over the measured part, MiB per minute.
slope = 0.0
if len(after) >= 2:
    ts = [s[0] for s in after]; rs = [s[1] / 1024 for s in after]
    mt, mr = sum(ts) / len(ts), sum(rs) / len(rs)
    den = sum((t - mt) ** 2 for t in ts)
    slope = 60 * sum((t - mt) * (r - mr) for t, r in zip(ts, rs)) / den if den else 0.0
allowed_kib = max(slack_mib * 1024, warm * 5 // 100)
flat = bool(after) and end - warm <= allowed_kib
ops = sum(r.get('operations', r.get('iterations', 0)) or 0 for r in records)
byts = sum(r.get('bytes', 0) or 0 for r in records)
summary = {
    'benchmark': 'soak', 'transport': 'grpc', 'mode': mode, 'workers': workers,
    'outstanding': int(outstanding), 'streams': workers * int(outstanding),
    'duration_s': int(duration), 'warmup_s': warmup,
    'workers_failed': failed, 'worker_records': len(records), 'ps_alive_at_end': ps_alive == '1',
    'ps_rss_kib': {'start': samples[0][1] if samples else 0, 'after_warmup': warm,
                   'end': end, 'peak_after_warmup': peak, 'allowed_growth': allowed_kib},
    'ps_rss_slope_mib_per_min': round(slope, 3),
    'ps_threads_end': samples[-1][2] if samples else 0, 'ps_fds_peak': max((s[3] for s in samples), default=0),
    'records_operations': ops, 'records_bytes': byts,
    'aggregate_mb_per_s': round(sum(r.get('mb_per_s', 0) or 0 for r in records), 1),
    'environment': records[0].get('environment') if records else None,
    'rss_flat': flat,
    'pass': failed == 0 and ps_alive == '1' and flat and len(records) >= workers,
}
json.dump(summary, open(f'{out}/summary.json', 'w'), indent=1)
print(json.dumps(summary, indent=1))
sys.exit(0 if summary['pass'] else 1)
EOF
