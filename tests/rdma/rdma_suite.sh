#!/bin/bash
# End-to-end psbench over one transport with real processes (meant for grpc+verbs on rxe0 in
# the Soft-RoCE guest; runs anywhere with TRANSPORT=grpc).
#
#   rdma_suite.sh BIN_DIR OUT_DIR [TRANSPORT]      (TRANSPORT default grpc+verbs)
#
# Cases:
#   BENCH/MODE/SCHEME  for latency|bandwidth|throughput x serialized|non-serialized (grpc; raw on
#                      the transports without wire modes) x
#                      uniform|random|skew|trace: one psbench-worker --validate against a
#                      psbench-ps started per benchmark; its JSON record must agree with the
#                      plan and with what the PS counted (check_records.py).
#   bandwidth/non-serialized/skew-default   the default 10-buffer large-bias skew (~6.3 MB)
#   BENCH/ps-exit      that benchmark's psbench-ps survived all its runs and exits 0 on SIGTERM
#   run/throughput-2ps-2w, run/latency      `psbench run` (it starts its own processes)
#   run/trainer        `psbench run --trainer=tiny`: 2 workers x 2 PS, sync, --validate
#   fault/MODE         psbench-ps --fault-corrupt-every=3: the worker must exit 1 naming the
#                      corrupted buffer, and the PS must survive
#   fault/ps-killed    the PS gets SIGKILL mid-run: the worker exits 1 naming it
#   fault/worker-killed  one of two workers gets SIGKILL: the other finishes, "peers_lost":1
#   fault/ps-stopped   the PS gets SIGSTOP: the worker exits 1 after --rpc-timeout (or, if it
#                      was still setting up, --connect-timeout), naming it
#   fault/hostile      psbench_hostile_client (if in BIN_DIR) at the PS port while a worker
#                      measures: every attack refused, the worker finishes, the PS survives
#   updates/sync, updates/async  `psbench run --benchmark=updates`, 3 workers x 2 PS: no lost
#                      update, every parameter exact
#   updates/fault-KIND-SYNC  2 workers x 2 PS with every PS armed with a test fault
#                      (PSBENCH_TEST_PS_FAULT: drop, duplicate, wrong-tensor of worker 1's
#                      step 3): the run fails, a worker's line naming PS, tensor and update
#   run/open-loop      `psbench run --load=poisson:200`, throughput 2 workers x 2 PS: every
#                      planned operation sent and counted
#   updates/timed-sync, updates/timed-async  the same with --replay=timed of a small
#                      psbench-trace/2, 2 workers x 2 PS: timed records, every parameter exact
# Prints one PASS/FAIL line per case (and the logs of failed ones), a summary, and exits 1 if
# any case failed, 2 on usage errors. Every process runs under `timeout`; servers are killed
# on exit. Outputs stay in OUT_DIR (one .out/.err/.jsonl per case).
#
# Env: PSBENCH_RDMA_SUITE_FILTER   bash regex: run only the cases whose name matches
#      PSBENCH_RDMA_SUITE_SKIP     bash regex: skip the cases whose name matches
#      PSBENCH_RDMA_SUITE_FLAGS    extra flags for every psbench-ps, psbench-worker and psbench
#                                  run, so only flags all three take (e.g. --rdma-poll=busy)
#      PSBENCH_RDMA_SUITE_TIMEOUT  bound on each worker / psbench run, seconds (default 60;
#                                  one takes 2-10 s in the guest)
set -euo pipefail

die() { echo "rdma_suite: $*" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: rdma_suite.sh BIN_DIR OUT_DIR [TRANSPORT]"
BIN=$(cd "$1" && pwd -P) || die "no directory $1"
mkdir -p "$2" || die "cannot create $2"
OUT=$(cd "$2" && pwd -P)
T=${3:-grpc+verbs}
# Wire modes exist on grpc only (psbench refuses --mode elsewhere); the other transports move
# the buffers as they are, which the cases call "raw".
if [ "$T" = grpc ]; then MODES=(non-serialized serialized); else MODES=(raw); fi
ONE_MODE=${MODES[0]} LAST_MODE=${MODES[-1]}
mode_flags() { [ "$1" = raw ] || echo "--mode=$1"; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CHECK_PY=$HERE/check_records.py
for f in psbench-ps psbench-worker psbench; do
    [ -x "$BIN/$f" ] || die "no executable $BIN/$f"
done
[ -f "$CHECK_PY" ] || die "no $CHECK_PY"
# The host's own python3: a pyenv shim on PATH may not work inside the guest's chroot.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

FILTER=${PSBENCH_RDMA_SUITE_FILTER:-}
SKIP=${PSBENCH_RDMA_SUITE_SKIP:-}
read -r -a EXTRA <<<"${PSBENCH_RDMA_SUITE_FLAGS:-}"
PROC_TIMEOUT=${PSBENCH_RDMA_SUITE_TIMEOUT:-60}
PS_LIFETIME=$((PROC_TIMEOUT * 20))   # a PS outlives all its clients; killed at the end anyway
LISTEN_WAIT=60                       # seconds for psbench-ps to print its listening line

# Small runs: emulated RDMA moves about 40 MB/s, and the default payload is ~4 MB.
QUICK=(--warmup-iterations=5 --iterations=20)
ITER=20
S=10 M=10240 L=1048576               # default --small --medium --large
# grpc+verbs must really move the payloads by RDMA: the PS's data_plane must say so.
DATA_PLANE=()
[[ $T == *verbs* ]] && DATA_PLANE=(--data-plane-has=RDMA)
# Sizes around the default 512 KiB receive slot of grpc+verbs (chunking edges) and tiny ones.
TRACE=$OUT/trace.json
TRACE_SIZES='[1, 524287, 524288, 524289, 4096, 3]'
echo "$TRACE_SIZES" >"$TRACE"

# --- bookkeeping -----------------------------------------------------------------------------
PASSED=0
FAILED=()
SERVERS=()          # pids of the `timeout` wrappers of running servers
NUM=0

cleanup() {
    local p
    for p in "${SERVERS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${SERVERS[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -n "${CHECK_PID:-}" ] && kill "$CHECK_PID" 2>/dev/null || true
}
trap cleanup EXIT

# One check_records.py for all cases, fed through a coprocess: a Python start costs 1-2 s in
# the emulated guest.
coproc CHECKER { exec "$PY" "$CHECK_PY" --serve 2>&1; }
CHECK_IN=${CHECKER[1]} CHECK_OUT=${CHECKER[0]} CHECK_PID=$CHECKER_PID

# check_records KIND FILE [flags...]: sets CHECK_LINES; returns 1 if the records are wrong.
check_records() {
    local IFS=$'\t' head n i line
    CHECK_LINES=()
    if ! kill -0 "$CHECK_PID" 2>/dev/null || ! echo "$*" >&"$CHECK_IN" ||
       ! read -r head <&"$CHECK_OUT"; then
        CHECK_LINES=("check_records.py died")
        return 1
    fi
    if [[ $head == PASS\ * ]]; then
        CHECK_LINES=("${head#PASS }")
        return 0
    fi
    n=${head#FAIL }
    [[ $n =~ ^[0-9]+$ ]] || n=0
    for ((i = 0; i < n; i++)); do
        read -r line <&"$CHECK_OUT" || break
        CHECK_LINES+=("$line")
    done
    return 1
}

selected() {
    [ -n "$SKIP" ] && [[ $1 =~ $SKIP ]] && return 1
    [ -z "$FILTER" ] || [[ $1 =~ $FILTER ]]
}
# any_selected NAME...: whether any of these cases runs (a PS is started only for those).
any_selected() {
    local n
    for n in "$@"; do selected "$n" && return 0; done
    return 1
}

# case_log NAME: sets LOG to a fresh per-case file prefix in OUT_DIR.
case_log() {
    NUM=$((NUM + 1))
    LOG=$OUT/$(printf '%02d' "$NUM")-${1//\//_}
    rm -f "$LOG".*
}

# elapsed START: seconds since START (an $EPOCHREALTIME), in pure bash (forks are slow here).
elapsed() {
    local now=$EPOCHREALTIME
    local d=$(( (${now//[!0-9]/} - ${1//[!0-9]/}) / 100000 ))
    echo "$((d / 10)).$((d % 10))s"
}

pass() {  # NAME START DETAIL
    PASSED=$((PASSED + 1))
    echo "PASS $1 ($(elapsed "$2")) $3"
}

fail() {  # NAME START REASON [LOG_PREFIX]: prints the case's logs
    FAILED+=("$1")
    echo "FAIL $1 ($(elapsed "$2")): $3"
    local f
    for f in "${4:-/nonexistent}".{err,check,out}; do
        [ -s "$f" ] || continue
        echo "  --- ${f##*/} (last 30 lines) ---"
        tail -n 30 "$f" | sed 's/^/  /'
    done
}

# start_ps NAME [psbench-ps flags...]: starts a PS on loopback; sets PS_PID, PS_PORT, PS_LOG.
# Returns 1 (after recording NAME as failed) if it does not print its listening line.
start_ps() {
    local name=$1 t0=$EPOCHREALTIME line= i
    shift
    case_log "$name"
    PS_LOG=$LOG PS_PORT=
    : >"$PS_LOG.out"    # exists before the first read below
    timeout -k 5 "$PS_LIFETIME" "$BIN/psbench-ps" --listen=127.0.0.1 --port=0 --transport="$T" \
        "${EXTRA[@]}" "$@" >"$PS_LOG.out" 2>"$PS_LOG.err" &
    PS_PID=$!
    SERVERS+=("$PS_PID")
    # First stdout line: "psbench-ps listening on 127.0.0.1:PORT transport=... pid=...".
    # `read` and the regex need no fork: every fork is slow in the emulated guest.
    for ((i = 0; i < LISTEN_WAIT * 10; i++)); do
        read -r line <"$PS_LOG.out" || true
        if [[ $line =~ ^psbench-ps\ listening\ on\ 127\.0\.0\.1:([0-9]+)\  ]]; then
            PS_PORT=${BASH_REMATCH[1]}
            return 0
        fi
        kill -0 "$PS_PID" 2>/dev/null || break
        sleep 0.1
    done
    local rc=0
    if kill -0 "$PS_PID" 2>/dev/null; then
        kill -TERM "$PS_PID" 2>/dev/null || true
        fail "$name" "$t0" "psbench-ps printed no listening line within ${LISTEN_WAIT}s" "$PS_LOG"
    else
        wait "$PS_PID" || rc=$?
        fail "$name" "$t0" "psbench-ps exited $rc before listening" "$PS_LOG"
    fi
    return 1
}

# stop_ps NAME PID LOG: the PS must still run, and exit 0 on SIGTERM.
stop_ps() {
    local name=$1 pid=$2 log=$3 t0=$EPOCHREALTIME rc=0
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" || rc=$?
        fail "$name" "$t0" "psbench-ps died during the runs (exit $rc)" "$log"
        return
    fi
    kill -TERM "$pid"
    wait "$pid" || rc=$?     # `timeout` passes SIGTERM on and returns the PS's status
    if [ "$rc" -eq 0 ]; then
        pass "$name" "$t0" "psbench-ps served its runs and exited 0 on SIGTERM"
    else
        fail "$name" "$t0" "psbench-ps exited $rc on SIGTERM" "$log"
    fi
}

# run_checked NAME KIND [check_records.py flags...] -- COMMAND...: runs COMMAND (under
# timeout, with --json=FILE appended) and expects exit 0, nothing on stderr, and records
# that check_records.py KIND accepts.
run_checked() {
    local name=$1 kind=$2 t0=$EPOCHREALTIME rc=0
    shift 2
    local check=()
    while [ "$1" != -- ]; do check+=("$1"); shift; done
    shift
    selected "$name" || return 0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$@" --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        local why="exited $rc"
        [ "$rc" -eq 124 ] && why="timed out after ${PROC_TIMEOUT}s"
        fail "$name" "$t0" "${1##*/} $why" "$LOG"
    elif [ -s "$LOG.err" ]; then
        fail "$name" "$t0" "${1##*/} succeeded but wrote to stderr" "$LOG"
    elif ! check_records "$kind" "$LOG.jsonl" --transport="$T" "${DATA_PLANE[@]}" "${check[@]}"; then
        printf '%s\n' "${CHECK_LINES[@]}" >"$LOG.check"
        fail "$name" "$t0" "the records check failed" "$LOG"
    else
        pass "$name" "$t0" "${CHECK_LINES[0]}"
    fi
}

# scheme SCHEME: sets SFLAGS (worker flags) and SCHECK (what the records must show).
scheme() {
    case $1 in
        uniform)    # S, M, L in turn
            SFLAGS=(--scheme=uniform --buffers=3)
            SCHECK=(--buffers="[$S, $M, $L]") ;;
        random)     # category i = [S, M, L][mt19937_64(2)() % 3], as in e2e_test's RandomPlan
            SFLAGS=(--scheme=random --buffers=5 --seed=2)
            SCHECK=(--buffers="[$S, $S, $M, $L, $S]") ;;
        skew)       # small bias: 6 S, 3 M, 1 L, round robin in bias order S, M, L
            SFLAGS=(--scheme=skew --skew-bias=small --buffers=10)
            SCHECK=(--buffers="[$S, $M, $L, $S, $M, $S, $M, $S, $S, $S]") ;;
        trace)
            SFLAGS=(--scheme=trace --trace="$TRACE")
            SCHECK=(--buffers="$TRACE_SIZES") ;;
    esac
}

echo "rdma_suite: transport $T, binaries $BIN, outputs $OUT${FILTER:+, filter '$FILTER'}"
SUITE_T0=$EPOCHREALTIME

# --- one psbench-worker per case against a PS per benchmark ----------------------------------
for bench in latency bandwidth throughput; do
    names=()
    for sch in uniform random skew trace; do
        for mode in "${MODES[@]}"; do names+=("$bench/$mode/$sch"); done
    done
    [ "$bench" = bandwidth ] && names+=("$bench/$ONE_MODE/skew-default")
    any_selected "${names[@]}" || continue
    start_ps "$bench/ps-start" || continue
    pid=$PS_PID port=$PS_PORT log=$PS_LOG
    for sch in uniform random skew trace; do
        scheme "$sch"
        for mode in "${MODES[@]}"; do
            run_checked "$bench/$mode/$sch" worker \
                --benchmark="$bench" --mode="$mode" --scheme="$sch" --iterations="$ITER" \
                "${SCHECK[@]}" -- \
                "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" "${EXTRA[@]}" \
                --benchmark="$bench" $(mode_flags "$mode") --validate "${SFLAGS[@]}" "${QUICK[@]}"
        done
    done
    if [ "$bench" = bandwidth ]; then
        # The default plan: 10 buffers, 6 L + 3 M + 1 S, ~6.3 MB a payload: few operations.
        run_checked "$bench/$ONE_MODE/skew-default" worker \
            --benchmark="$bench" --mode="$ONE_MODE" --scheme=skew --iterations=8 \
            --buffers="[$L, $M, $S, $L, $M, $L, $M, $L, $L, $L]" -- \
            "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" "${EXTRA[@]}" \
            --benchmark="$bench" --validate --scheme=skew --warmup-iterations=2 --iterations=8
    fi
    stop_ps "$bench/ps-exit" "$pid" "$log"
done

# --- psbench run: the driver starts its own PS and workers -----------------------------------
run_checked run/throughput-2ps-2w run \
    --benchmark=throughput --mode="$ONE_MODE" --scheme=uniform --iterations="$ITER" \
    --num-ps=2 --num-workers=2 --buffers="[$S, $M, $L]" -- \
    "$BIN/psbench" run --transport="$T" "${EXTRA[@]}" --benchmark=throughput \
    --num-ps=2 --num-workers=2 --validate --buffers=3 "${QUICK[@]}"
run_checked run/latency run \
    --benchmark=latency --mode="$LAST_MODE" --scheme=trace --iterations="$ITER" \
    --buffers="$TRACE_SIZES" -- \
    "$BIN/psbench" run --transport="$T" "${EXTRA[@]}" --benchmark=latency $(mode_flags "$LAST_MODE") \
    --validate --scheme=trace --trace="$TRACE" "${QUICK[@]}"

# --- the embedded trainer: 2 workers x 2 PS train `tiny` synchronously over this transport, -
# with --validate; both sides' data-plane counts must show every tensor byte on $T's data
# plane, and both workers must end with the same parameters, to the bit (a psbench built
# without the trainer refuses --trainer: the case then passes as not applicable).
name=run/trainer
if selected "$name"; then
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench" run --transport="$T" "${EXTRA[@]}" --trainer=tiny \
        --batch=4 --num-ps=2 --num-workers=2 --steps=5 --warmup-steps=0 --validate \
        --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" || rc=$?
    if [ "$rc" -eq 2 ] && grep -q "built without the trainer" "$LOG.err"; then
        # (CI cannot get here: tests/check_suites.sh fails a build whose trainer label is empty.)
        pass "$name" "$t0" "not applicable: this psbench has no trainer"
    elif [ "$rc" -ne 0 ]; then
        fail "$name" "$t0" "psbench run --trainer exited $rc" "$LOG"
    elif ! check_records moved "$LOG.jsonl" --transport="$T" --records=3; then
        printf '%s\n' "${CHECK_LINES[@]}" >"$LOG.check"
        fail "$name" "$t0" "the data planes' counts do not prove where the tensors went" "$LOG"
    elif ! "$PY" - "$LOG.jsonl" "$T" >"$LOG.check" 2>&1 <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
workers = [r for r in records if r.get("kind") == "train"]
assert len(workers) == 2, f"{len(workers)} worker records"
for w in workers:
    assert w["transport"] == sys.argv[2], w["transport"]
    assert w["steps"] == 5 and w["validate"], w
fp = [w["final_params"] for w in workers]
assert fp[0]["hash"] == fp[1]["hash"] and fp[0] == fp[1], "workers disagree"
print(f"2 workers, final parameters bit-identical (hash {fp[0]['hash']}, sum {fp[0]['sum']})")
PY
    then
        fail "$name" "$t0" "the training records check failed" "$LOG"
    else
        pass "$name" "$t0" "$(tail -1 "$LOG.check")"
    fi
fi

# --- a PS that corrupts every 3rd payload: --validate must fail the worker -------------------
if any_selected "${MODES[@]/#/fault/}"; then
    if start_ps fault/ps-start --fault-corrupt-every=3; then
        pid=$PS_PID port=$PS_PORT log=$PS_LOG
        for mode in "${MODES[@]}"; do
            name=fault/$mode
            selected "$name" || continue
            t0=$EPOCHREALTIME rc=0
            case_log "$name"
            timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench-worker" --ps="127.0.0.1:$port" \
                --transport="$T" "${EXTRA[@]}" --benchmark=latency $(mode_flags "$mode") --validate \
                --quiet "${QUICK[@]}" >"$LOG.out" 2>"$LOG.err" || rc=$?
            err=$(<"$LOG.err")
            # One line: "psbench-worker: validation failed: PS HOST:PORT: buffer I of N (...)..."
            if [ "$rc" -ne 1 ]; then
                fail "$name" "$t0" "psbench-worker exited $rc, expected 1" "$LOG"
            elif [[ $err == *$'\n'* ]] || [[ $err != "psbench-worker: validation failed"* ]]; then
                fail "$name" "$t0" "expected one line 'psbench-worker: validation failed...'" "$LOG"
            elif ! [[ $err =~ buffer\ [0-9]+\ of\ [0-9]+ ]]; then
                fail "$name" "$t0" "the message does not name the corrupted buffer" "$LOG"
            elif [[ $err != *"127.0.0.1:$port"* ]]; then
                fail "$name" "$t0" "the message does not name the PS 127.0.0.1:$port" "$LOG"
            else
                pass "$name" "$t0" "exit 1: ${err#psbench-worker: }"
            fi
        done
        stop_ps fault/ps-exit "$pid" "$log"
    fi
fi

# --- a PS killed with SIGKILL mid-run: the worker ends with a message naming it, in time ------
if selected fault/ps-killed && start_ps fault/ps-killed-start; then
    name=fault/ps-killed
    port=$PS_PORT
    # $PS_PID is the `timeout` around the PS: kill the PS itself (pid= in its first line).
    read -r line <"$PS_LOG.out" || true
    [[ $line =~ pid=([0-9]+) ]] && pid=${BASH_REMATCH[1]} || pid=$PS_PID
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" \
        "${EXTRA[@]}" --benchmark=bandwidth --warmup=0s --duration=60s --quiet \
        >"$LOG.out" 2>"$LOG.err" &
    worker=$!
    # Kill the PS only once the worker streams: it has opened the RDMA device (the last step
    # before its session with the PS), plus time to set up. A fixed sleep was too short when
    # the emulated guest ran slowly, and the worker then rightly reported an unreachable PS.
    worker_pid=
    for ((i = 0; i < 300; i++)); do
        if [ -z "$worker_pid" ]; then
            read -r worker_pid _ <"/proc/$worker/task/$worker/children" 2>/dev/null || true
        fi
        if [ -n "$worker_pid" ] && { [ "$T" != grpc+verbs ] ||
            ls -l "/proc/$worker_pid/fd" 2>/dev/null | grep -q uverbs; }; then
            break
        fi
        sleep 0.1
    done
    sleep 3
    kill -KILL "$pid" 2>/dev/null || true
    wait "$worker" || rc=$?
    { wait "$PS_PID"; } 2>/dev/null || true  # reap the PS's timeout quietly
    err=$(<"$LOG.err")
    if [ "$rc" -ne 1 ]; then
        fail "$name" "$t0" "psbench-worker exited $rc, expected 1 (124: it hung)" "$LOG"
    elif [[ $err != *"127.0.0.1:$port"* ]]; then
        fail "$name" "$t0" "the message does not name the PS 127.0.0.1:$port" "$LOG"
    else
        pass "$name" "$t0" "exit 1: ${err#psbench-worker: }"
    fi
fi

# --- faults (ctest label faults: rdma_faults runs only these) --------------------------------
# real_pid WRAPPER: the pid of the process a `timeout` wrapper runs (its only child).
real_pid() {
    local child= i
    for ((i = 0; i < 100; i++)); do
        read -r child _ <"/proc/$1/task/$1/children" 2>/dev/null || true
        [ -n "$child" ] && break
        sleep 0.05
    done
    echo "${child:-$1}"
}
# streaming PID: waits until that worker streams (over grpc+verbs: it has opened the RDMA
# device, the last step before its session), then 2 s more.
streaming() {
    local i
    for ((i = 0; i < 300; i++)); do
        if [ "$T" != grpc+verbs ] || ls -l "/proc/$1/fd" 2>/dev/null | grep -q uverbs; then break; fi
        sleep 0.1
    done
    sleep 2
}
ps_pid_of() {  # LOG: the PS's own pid, from its listening line
    local line=
    read -r line <"$1.out" || true
    [[ $line =~ pid=([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
}

# One of two workers is killed mid-run: the PS keeps serving the other, which finishes with a
# valid record that says a peer was lost; the PS then exits 0 on SIGTERM.
if selected fault/worker-killed && start_ps fault/worker-killed-start; then
    name=fault/worker-killed
    pid=$PS_PID port=$PS_PORT log=$PS_LOG
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" \
        "${EXTRA[@]}" --benchmark=bandwidth --warmup=0s --duration=8s --quiet \
        --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" &
    keeper=$!
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" \
        "${EXTRA[@]}" --benchmark=bandwidth --warmup=0s --duration=60s --quiet \
        >"$LOG.victim.out" 2>"$LOG.victim.err" &
    victim=$!
    victim_pid=$(real_pid "$victim")
    streaming "$victim_pid"
    kill -KILL "$victim_pid" 2>/dev/null || true
    { wait "$victim"; } 2>/dev/null || true
    wait "$keeper" || rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name" "$t0" "the surviving worker exited $rc, expected 0" "$LOG"
    elif ! grep -q '"peers_lost":1' "$LOG.jsonl"; then
        fail "$name" "$t0" "the survivor's record does not say \"peers_lost\":1" "$LOG"
    elif ! grep -q 'warning: 1 other worker left the PS' "$LOG.err"; then
        fail "$name" "$t0" "the survivor did not warn that a peer was lost" "$LOG"
    else
        pass "$name" "$t0" "the survivor finished, \"peers_lost\":1"
    fi
    stop_ps fault/worker-killed-ps-exit "$pid" "$log"
fi

# A stopped PS (SIGSTOP: alive, connected, silent): the worker gives up after --rpc-timeout,
# exit 1 naming the PS, instead of hanging.
if selected fault/ps-stopped && start_ps fault/ps-stopped-start; then
    name=fault/ps-stopped
    port=$PS_PORT
    pid=$(ps_pid_of "$PS_LOG")
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" \
        "${EXTRA[@]}" --benchmark=bandwidth --warmup=0s --duration=60s --rpc-timeout=3s --quiet \
        >"$LOG.out" 2>"$LOG.err" &
    worker=$!
    streaming "$(real_pid "$worker")"
    stopped_at=$EPOCHREALTIME
    kill -STOP "$pid" 2>/dev/null || true
    wait "$worker" || rc=$?
    took=$(elapsed "$stopped_at")
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
    { wait "$PS_PID"; } 2>/dev/null || true
    err=$(<"$LOG.err")
    if [ "$rc" -ne 1 ]; then
        fail "$name" "$t0" "psbench-worker exited $rc, expected 1 (124: it hung)" "$LOG"
    elif [[ $err != *"127.0.0.1:$port"* ]]; then
        fail "$name" "$t0" "the message does not name the PS 127.0.0.1:$port" "$LOG"
    elif ((${took%%.*} > 25)); then
        fail "$name" "$t0" "gave up $took after the stop (--rpc-timeout=3s)" "$LOG"
    else
        pass "$name" "$t0" "exit 1 $took after the stop: ${err#psbench-worker: }"
    fi
fi

# A hostile client on the PS's gRPC port while a worker measures: each attack refused, the
# worker finishes (no peer lost), the PS survives and exits 0 on SIGTERM.
if selected fault/hostile && [ -x "$BIN/psbench_hostile_client" ] &&
    start_ps fault/hostile-start --max-message-size=64K; then
    name=fault/hostile
    pid=$PS_PID port=$PS_PORT log=$PS_LOG
    t0=$EPOCHREALTIME rc=0 hrc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench-worker" --ps="127.0.0.1:$port" --transport="$T" \
        "${EXTRA[@]}" --benchmark=bandwidth --sizes=16K:16K --warmup=0s --duration=10s --validate --quiet \
        --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" &
    worker=$!
    streaming "$(real_pid "$worker")"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench_hostile_client" "127.0.0.1:$port" 65536 \
        >"$LOG.hostile.out" 2>&1 || hrc=$?
    wait "$worker" || rc=$?
    if [ "$hrc" -ne 0 ]; then
        cp "$LOG.hostile.out" "$LOG.check"
        fail "$name" "$t0" "psbench_hostile_client exited $hrc (an attack was not refused)" "$LOG"
    elif [ "$rc" -ne 0 ]; then
        fail "$name" "$t0" "the worker measuring through the attacks exited $rc" "$LOG"
    elif ! grep -q '^PASS raw/garbage: .*status 12' "$LOG.hostile.out" ||
        ! grep -q '^PASS serialized/garbage: .*status 12' "$LOG.hostile.out"; then
        cp "$LOG.hostile.out" "$LOG.check"
        fail "$name" "$t0" "the PS answered gRPC payload methods (its bytes must go over RDMA only)" "$LOG"
    elif ! grep -q '"peers_lost":0' "$LOG.jsonl"; then
        fail "$name" "$t0" "the worker's record does not say \"peers_lost\":0" "$LOG"
    else
        pass "$name" "$t0" "$(grep -c '^PASS' "$LOG.hostile.out") attacks refused, the worker finished"
    fi
    stop_ps fault/hostile-ps-exit "$pid" "$log"
fi

# --- the RDMA port goes down: the PS refuses to start and names the port state --------------
# Only on the Soft-RoCE guest (rxe0 on dummy0): never take a real host's link down.
if [ "$T" = grpc+verbs ] && selected verbs/port-down && [ -d /sys/class/infiniband/rxe0 ] &&
    [ -e /sys/class/net/dummy0 ]; then
    name=verbs/port-down
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    state=/sys/class/infiniband/rxe0/ports/1/state
    ip link set dummy0 down
    for ((i = 0; i < 50; i++)); do [[ $(<"$state") == *DOWN* ]] && break; sleep 0.1; done
    timeout -k 5 30 "$BIN/psbench-ps" --listen=127.0.0.1 --transport="$T" \
        >"$LOG.out" 2>"$LOG.err" || rc=$?
    ip link set dummy0 up
    for ((i = 0; i < 100; i++)); do [[ $(<"$state") == *ACTIVE* ]] && break; sleep 0.1; done
    err=$(<"$LOG.err")
    if [ "$rc" -ne 2 ]; then
        fail "$name" "$t0" "psbench-ps exited $rc, expected 2" "$LOG"
    elif [[ $err != *"no active RDMA port: rxe0 (port 1 down)"* ]]; then
        fail "$name" "$t0" "the message does not name rxe0 and its DOWN port" "$LOG"
    elif [[ $(<"$state") != *ACTIVE* ]]; then
        fail "$name" "$t0" "rxe0 did not come back ACTIVE" "$LOG"
    else
        pass "$name" "$t0" "exit 2: ${err#psbench-ps: }"
    fi
fi

# After a `psbench run` case ($rc, $LOG): fails it and returns 0 when the run exited non-zero
# or wrote to stderr; returns 1 when the run itself was clean.
run_failed() {
    if [ "$rc" -ne 0 ]; then
        fail "$1" "$2" "psbench run exited $rc (124: it hung)" "$LOG"
    elif [ -s "$LOG.err" ]; then
        fail "$1" "$2" "psbench run succeeded but wrote to stderr" "$LOG"
    else
        return 1
    fi
}

# --- no lost update: psbench run --benchmark=updates, 3 workers x 2 PS -------------
# Every worker pushes integer gradients through kExchange to both PS for 8 steps (2 x 1 MiB,
# chunked over the RDMA slots, 2 x 10 KiB, 2 x 10 B), sync and async; every parameter must
# come back exact against what each PS says it applied (a worker exits 1 naming the first
# that is not), and each worker's record must say so, over $T (and RDMA for grpc+verbs).
for sync in sync async; do
    name=updates/$sync
    selected "$name" || continue
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench" run --transport="$T" "${EXTRA[@]}" \
        --benchmark=updates --"$sync" --num-ps=2 --num-workers=3 --steps=8 --buffers=6 \
        --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" || rc=$?
    records=0 exact=0 rdma=0
    if [ -f "$LOG.jsonl" ]; then
        while IFS= read -r line; do
            records=$((records + 1))
            [[ $line == *'"result":"exact"'* && $line == *"\"transport\":\"$T\""* ]] && exact=$((exact + 1))
            [[ $line == *'"data_plane":"'*RDMA* ]] && rdma=$((rdma + 1))
        done <"$LOG.jsonl"
    fi
    if run_failed "$name" "$t0"; then
        :
    elif [ "$records" -ne 3 ] || [ "$exact" -ne 3 ]; then
        fail "$name" "$t0" "$exact of $records worker records exact over $T, expected 3 of 3" "$LOG"
    elif [[ $T == *verbs* ]] && [ "$rdma" -ne 3 ]; then
        fail "$name" "$t0" "the records do not say that RDMA carried the updates" "$LOG"
    elif ! check_records moved "$LOG.jsonl" --transport="$T" --records=3; then
        printf '%s\n' "${CHECK_LINES[@]}" >"$LOG.check"
        fail "$name" "$t0" "the data planes' counts do not prove where the updates went" "$LOG"
    else
        pass "$name" "$t0" "3 workers x 2 PS, 8 $sync steps: every parameter exact"
    fi
done

# --- the check can fire: every PS drops, doubles or misplaces worker 1's step 3 -------------
# ... of the first tensor of its shard, and accounts for it as a correct store would: the run
# must exit 1 with the line of a worker naming the PS, the tensor and that update, over $T.
for fault in drop duplicate wrong-tensor; do
    for sync in sync async; do
        name=updates/fault-$fault-$sync
        selected "$name" || continue
        t0=$EPOCHREALTIME rc=0
        case_log "$name"
        PSBENCH_TEST_PS_FAULT="$fault:1:3:0" timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench" run --transport="$T" \
            "${EXTRA[@]}" --benchmark=updates --"$sync" --num-ps=2 --num-workers=2 --steps=6 --buffers=6 \
            >"$LOG.out" 2>"$LOG.err" || rc=$?
        words="is missing"
        [ "$fault" = duplicate ] && words="an extra update of"
        if [ "$rc" -ne 1 ]; then
            fail "$name" "$t0" "psbench run exited $rc, expected 1 (124: it hung)" "$LOG"
        elif ! grep -q "updates lost or wrong: PS .* tensor [0-9]*: .*worker 1's step 3" "$LOG.err" ||
             ! grep -q "$words" "$LOG.err"; then
            fail "$name" "$t0" "no line names the PS, the tensor and worker 1's step 3 ($words)" "$LOG"
        else
            pass "$name" "$t0" "$fault of worker 1's step 3, $sync: caught and named"
        fi
    done
done

# --- timed replay: a captured step replayed as it ran, 2 workers x 2 PS --------------------
# A small psbench-trace/2 (four tensors in two buckets, one over the 512 KiB receive slot of
# grpc+verbs, three steps of 50 ms compute) replayed with --replay=timed: each bucket goes
# when the trace says it became ready, every parameter must come back exact, and each record
# must say timed, with a latency for every tensor, over $T (and RDMA for grpc+verbs).
TIMED_TRACE=$OUT/timed-trace.json
cat >"$TIMED_TRACE" <<'JSON'
{"format": "psbench-trace/2",
 "tensors": [{"name": "a", "dtype": "float32", "bytes": 4096}, {"name": "b", "dtype": "float32", "bytes": 600000},
             {"name": "c", "dtype": "float32", "bytes": 256}, {"name": "d", "dtype": "float32", "bytes": 65536}],
 "buckets": {"tensors": [[3, 2], [1, 0]]},
 "steps": [
  {"start_us": 0, "compute_us": 50000, "ready_us": [35000, 34000, 15000, 14000]},
  {"start_us": 60000, "compute_us": 50000, "ready_us": [null, 34000, 15000, 14000]},
  {"start_us": 120000, "compute_us": 50000, "ready_us": [35000, 34000, 15000, 14000]}]}
JSON
for sync in sync async; do
    name=updates/timed-$sync
    selected "$name" || continue
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench" run --transport="$T" "${EXTRA[@]}" \
        --benchmark=updates --"$sync" --num-ps=2 --num-workers=2 --steps=3 --scheme=trace \
        --trace="$TIMED_TRACE" --replay=timed --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" || rc=$?
    records=0 timed=0 rdma=0
    if [ -f "$LOG.jsonl" ]; then
        while IFS= read -r line; do
            records=$((records + 1))
            [[ $line == *'"result":"exact"'* && $line == *"\"transport\":\"$T\""* &&
               $line == *'"mode":"timed"'* && $line == *'"per_tensor":[{'* ]] && timed=$((timed + 1))
            [[ $line == *'"data_plane":"'*RDMA* ]] && rdma=$((rdma + 1))
        done <"$LOG.jsonl"
    fi
    if run_failed "$name" "$t0"; then
        :
    elif [ "$records" -ne 2 ] || [ "$timed" -ne 2 ]; then
        fail "$name" "$t0" "$timed of $records worker records timed and exact over $T, expected 2 of 2" "$LOG"
    elif [[ $T == *verbs* ]] && [ "$rdma" -ne 2 ]; then
        fail "$name" "$t0" "the records do not say that RDMA carried the replay" "$LOG"
    elif ! check_records moved "$LOG.jsonl" --transport="$T" --records=2; then
        printf '%s\n' "${CHECK_LINES[@]}" >"$LOG.check"
        fail "$name" "$t0" "the data planes' counts do not prove where the replay went" "$LOG"
    elif ! grep -q '# slowest tensors of worker' "$LOG.out"; then
        fail "$name" "$t0" "no per-tensor latency table" "$LOG"
    else
        pass "$name" "$t0" "2 workers x 2 PS, 3 $sync steps replayed as timed: every parameter exact"
    fi
done

# --- open-loop load: Poisson arrivals, 2 workers x 2 PS ------------------------------------
# Each worker starts pushes at 200/s on its own seeded schedule without waiting for replies;
# every planned operation must be sent and counted (40 per PS per worker), none dropped, over
# $T (and RDMA for grpc+verbs).
name=run/open-loop
if selected "$name"; then
    t0=$EPOCHREALTIME rc=0
    case_log "$name"
    timeout -k 5 "$PROC_TIMEOUT" "$BIN/psbench" run --transport="$T" "${EXTRA[@]}" \
        --benchmark=throughput --num-ps=2 --num-workers=2 --load=poisson:200 --iterations=40 \
        --warmup-iterations=4 --json="$LOG.jsonl" >"$LOG.out" 2>"$LOG.err" || rc=$?
    total=$(grep -c '"scope":"total"' "$LOG.jsonl" 2>/dev/null || true)
    complete=$(grep '"scope":"total"' "$LOG.jsonl" 2>/dev/null | grep -c '"completed":160,"corrected_us"' || true)
    rdma=$(grep -c '"data_plane":"[^"]*RDMA' "$LOG.jsonl" 2>/dev/null || true)
    if run_failed "$name" "$t0"; then
        :
    elif [ "$total" -ne 1 ] || [ "$complete" -ne 1 ]; then
        fail "$name" "$t0" "the total record does not count 160 completed operations" "$LOG"
    elif [[ $T == *verbs* ]] && [ "$rdma" -lt 3 ]; then
        fail "$name" "$t0" "the records do not say that RDMA carried the load" "$LOG"
    elif ! check_records moved "$LOG.jsonl" --transport="$T" --records=3; then
        printf '%s\n' "${CHECK_LINES[@]}" >"$LOG.check"
        fail "$name" "$t0" "the data planes' counts do not prove where the load went" "$LOG"
    elif ! grep -q '# open-loop load, ' "$LOG.out"; then
        fail "$name" "$t0" "no open-loop table" "$LOG"
    else
        pass "$name" "$t0" "2 workers x 2 PS, Poisson 200/s each: 160 operations planned and completed"
    fi
fi

# --- summary ---------------------------------------------------------------------------------
total=$((PASSED + ${#FAILED[@]}))
echo "rdma_suite: $PASSED/$total passed over $T in $(elapsed "$SUITE_T0")"
if [ "$total" -eq 0 ]; then
    echo "rdma_suite: no case matched the filter '$FILTER'"
    exit 1
fi
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "rdma_suite: FAILED: ${FAILED[*]}"
    exit 1
fi
