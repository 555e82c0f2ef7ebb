#!/usr/bin/env python3
"""Checks the JSON Lines records of one psbench run for byte-count consistency.

Used by rdma_suite.sh. Two forms:

  check_records.py worker FILE --transport=T --benchmark=B --mode=M --scheme=S --iterations=N
                              [--num-ps=P] [--buffers=JSON | --sizes-in=JSON --num-buffers=K]
                              [--count=SIZE:N ...]
      FILE holds exactly one record from one psbench-worker against P PS processes.
      Every count must agree: the worker's operations and bytes, and what each PS says it
      received during the measurement (ps_counted).

  check_records.py run FILE (same flags) --num-workers=W
      FILE holds the records of `psbench run`: W worker records, plus a total when W > 1.

  check_records.py moved FILE --transport=T --records=N
      FILE holds N worker records (updates, train, benchmarks) whose "moved" must prove
      that T's data plane carried every payload byte, on both sides, and gRPC none.

Every worker record's "moved" is checked (check_moved): the data plane's own counts on the
worker and on each PS against the payload bytes the benchmark counted.

Prints one line on success; on failure prints every problem and exits 1. With --serve it
checks one request per stdin line instead (see serve()). Standard library only: it runs under
the host's /usr/bin/python3 inside the guest too.
"""
import argparse
import json
import sys

problems = []


def expect(ok, what):
    if not ok:
        problems.append(what)
    return ok


def expect_eq(actual, expected, what):
    return expect(actual == expected, f"{what}: got {actual!r}, expected {expected!r}")


def check_latency(lat, count, what):
    if not expect(isinstance(lat, dict), f"{what}: missing"):
        return
    expect_eq(lat.get("count"), count, f"{what}.count")
    keys = ["min", "p50", "p90", "p99", "p999", "max"]
    vals = [lat.get(k) for k in keys]
    if expect(all(isinstance(v, (int, float)) for v in vals), f"{what}: missing percentiles"):
        expect(vals[0] > 0, f"{what}.min must be > 0")
        expect(vals == sorted(vals), f"{what}: percentiles out of order {vals}")


PLANES = {"grpc": "grpc", "grpc+verbs": "rdma", "grpc+mpi": "mpi"}


def check_moved(r, transport, tag, ps_payload=None):
    """r["moved"]: the worker's data plane carried exactly the benchmark's payload bytes both
    ways, every PS serves the same plane, and on a plane other than gRPC no gRPC payload call
    left the worker's process. ps_payload: [(received, sent)] each PS must have counted (one
    worker)."""
    m = r.get("moved")
    if not expect(isinstance(m, dict), f"{tag} moved: missing"):
        return
    plane = PLANES.get(transport, transport)
    expect_eq(m.get("plane"), plane, f"{tag} moved.plane")
    expect_eq(m.get("agrees"), True, f"{tag} moved.agrees")
    worker = m.get("worker") or {}
    for way in ("sent", "received"):
        key = f"payload_bytes_{way}"
        expect_eq(worker.get(key), m.get(key), f"{tag} moved.worker.{key} (the benchmark's count)")
    expect((m.get("payload_bytes_sent") or 0) > 0, f"{tag} moved: no payload bytes sent")
    expect((worker.get("messages_sent") or 0) > 0, f"{tag} moved.worker: no {plane} messages")
    if plane != "grpc":
        grpc = m.get("grpc_payload") or {}
        expect_eq(grpc.get("messages_sent"), 0, f"{tag} moved.grpc_payload.messages_sent")
        expect_eq(grpc.get("bytes_sent"), 0, f"{tag} moved.grpc_payload.bytes_sent")
    ps = m.get("ps") or []
    for i, p in enumerate(ps):
        expect_eq(p.get("plane"), plane, f"{tag} moved.ps[{i}].plane")
        if ps_payload is not None and i < len(ps_payload):
            expect_eq(p.get("payload_bytes_received"), ps_payload[i][0], f"{tag} moved.ps[{i}].payload_bytes_received")
            expect_eq(p.get("payload_bytes_sent"), ps_payload[i][1], f"{tag} moved.ps[{i}].payload_bytes_sent")
    if ps_payload is None:
        # Several workers: together the PS took at least this worker's bytes.
        expect(sum(p.get("payload_bytes_received", 0) for p in ps) >= m.get("payload_bytes_sent", 0),
               f"{tag} moved.ps: fewer payload bytes received than this worker sent")


def check_plan(r, a):
    """The buffer sizes the record reports against what the flags asked for."""
    buffers = r.get("buffers")
    if not expect(isinstance(buffers, list) and buffers and
                  all(isinstance(b, int) for b in buffers),
                  f"buffers: expected one flat list of sizes, got {buffers!r}"):
        return None
    if a.buffers is not None:
        expect_eq(buffers, json.loads(a.buffers), "buffers")
    if a.sizes_in is not None:
        allowed = set(json.loads(a.sizes_in))
        expect(set(buffers) <= allowed, f"buffers {buffers} not all in {sorted(allowed)}")
    if a.num_buffers is not None:
        expect_eq(len(buffers), a.num_buffers, "number of buffers")
    for c in a.count:
        size, n = (int(x) for x in c.split(":"))
        expect_eq(buffers.count(size), n, f"buffers of {size} B")
    payload = sum(buffers)
    expect_eq(r.get("payload_bytes"), payload, "payload_bytes (sum of buffers)")
    expect_eq(r.get("payloads"), 1, "payloads")
    return payload


def check_worker_record(r, a, workers, tag):
    """One worker's record. Returns (operations, payload bytes)."""
    before = len(problems)
    throughput = a.benchmark == "throughput"
    ops = a.iterations * (a.num_ps if throughput else 1)
    expect_eq(r.get("scope"), "worker", f"{tag} scope")
    expect_eq(r.get("transport"), a.transport, f"{tag} transport")
    expect_eq(r.get("benchmark"), a.benchmark, f"{tag} benchmark")
    # "raw": a transport without wire modes, whose records name none.
    expect_eq(r.get("mode"), None if a.mode == "raw" else a.mode, f"{tag} mode")
    expect_eq(r.get("scheme"), a.scheme, f"{tag} scheme")
    expect_eq(r.get("validate"), True, f"{tag} validate")
    expect_eq(r.get("workers"), workers, f"{tag} workers")
    expect_eq(r.get("ps"), a.num_ps, f"{tag} ps")
    expect_eq(r.get("iterations"), ops, f"{tag} iterations (operations)")
    payload = check_plan(r, a)
    if payload is not None:
        expect_eq(r.get("bytes"), payload * ops, f"{tag} bytes = payload_bytes x operations")
    expect((r.get("seconds") or 0) > 0, f"{tag} seconds must be > 0")
    for p in r.get("placement", {}).get("ps", []):
        expect_eq(p.get("transport"), a.transport, f"{tag} placement.ps[].transport")
        if a.data_plane_has:
            # Guards against a transport that quietly falls back to TCP.
            dp = str(p.get("data_plane"))
            expect(a.data_plane_has.lower() in dp.lower(),
                   f"{tag} placement.ps[].data_plane {dp!r} does not mention {a.data_plane_has!r}")

    # What each PS counted itself over the worker's measurement window.
    counted = r.get("ps_counted") or []
    if expect_eq(len(counted), a.num_ps, f"{tag} ps_counted entries"):
        per_ps = a.iterations if throughput else ops
        for i, c in enumerate(counted):
            rpcs, nbytes = c.get("rpcs"), c.get("bytes")
            if workers == 1:
                # Alone, the PS saw exactly this worker's operations and bytes.
                expect_eq(rpcs, per_ps, f"{tag} ps_counted[{i}].rpcs")
                if payload is not None:
                    expect_eq(nbytes, per_ps * payload, f"{tag} ps_counted[{i}].bytes")
            else:
                # Other workers' operations may fall into this window too: at least our own.
                expect(isinstance(rpcs, int) and rpcs >= per_ps,
                       f"{tag} ps_counted[{i}].rpcs {rpcs} < {per_ps} sent by this worker")
                if payload is not None:
                    expect(isinstance(nbytes, int) and nbytes >= per_ps * payload,
                           f"{tag} ps_counted[{i}].bytes {nbytes} < {per_ps * payload}")

    if payload is not None:
        per_ps = a.iterations if throughput else ops
        back = per_ps * payload if a.benchmark == "latency" else 0
        check_moved(r, a.transport, tag, [(per_ps * payload, back)] * a.num_ps if workers == 1 else None)

    if a.benchmark == "latency":
        check_latency(r.get("latency_us"), ops, f"{tag} latency_us")
    else:
        check_latency(r.get("rpc_latency_us"), ops, f"{tag} rpc_latency_us")
        expect((r.get("mb_per_s") or 0) > 0, f"{tag} mb_per_s must be > 0")
    if throughput:
        expect_eq(r.get("rpc_per_ps"), [a.iterations] * a.num_ps, f"{tag} rpc_per_ps")
    if len(problems) > before:
        problems.insert(before, f"{tag}: {json.dumps(r)[:1500]}")
    return ops, payload


def parser():
    p = argparse.ArgumentParser(prog="check_records.py")
    p.add_argument("kind", choices=["worker", "run", "moved"])
    p.add_argument("file")
    p.add_argument("--transport", required=True)
    p.add_argument("--benchmark")
    p.add_argument("--mode")
    p.add_argument("--scheme")
    p.add_argument("--iterations", type=int)
    p.add_argument("--records", type=int, help="moved: how many records FILE holds")
    p.add_argument("--num-ps", type=int, default=1)
    p.add_argument("--num-workers", type=int, default=1)
    p.add_argument("--buffers", help="exact list of buffer sizes (JSON)")
    p.add_argument("--sizes-in", help="every buffer size is one of these (JSON list)")
    p.add_argument("--num-buffers", type=int)
    p.add_argument("--count", action="append", default=[], metavar="SIZE:N",
                   help="exactly N buffers of SIZE bytes")
    p.add_argument("--data-plane-has", help="every PS's data_plane contains this (any case)")
    return p


def check(a):
    """Checks one file; returns (ok, lines to print)."""
    del problems[:]
    try:
        with open(a.file) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        return False, [f"{a.file}: {e}"]

    if a.kind == "moved":
        if expect_eq(len(records), a.records, f"{a.file}: records"):
            for i, r in enumerate(records):
                if r.get("scope") == "total" or str(r.get("kind", "")).endswith("_total"):
                    expect("moved" not in r, f"record {i}: a total carries one worker's moved")
                    continue
                check_moved(r, a.transport, f"record {i} ({r.get('kind') or r.get('benchmark')})")
        if problems:
            return False, list(problems)
        return True, [f"moved ok: {len(records)} records; every payload byte on the {PLANES.get(a.transport)} data plane"]

    w = a.num_workers
    expected = w + (1 if a.kind == "run" and w > 1 else 0)
    if not expect_eq(len(records), expected, f"{a.file}: records"):
        return False, list(problems)

    ops = payload = None
    for i in range(w):
        ops, payload = check_worker_record(records[i], a, w, f"worker {i}")
        if w > 1:
            expect_eq(records[i].get("worker_index"), i, f"worker {i} worker_index")

    if w > 1:
        t = records[w]
        expect_eq(t.get("scope"), "total", "total scope")
        expect_eq(t.get("workers"), w, "total workers")
        expect_eq(t.get("iterations"), w * ops, "total iterations")
        if payload is not None:
            expect_eq(t.get("bytes"), w * ops * payload, "total bytes")
        if a.benchmark == "throughput":
            expect_eq(t.get("rpc_per_ps"), [w * a.iterations] * a.num_ps, "total rpc_per_ps")
        expect_eq(len(t.get("per_worker") or []), w, "total per_worker entries")

    if problems:
        return False, list(problems)
    return True, [f"records ok: {w} worker(s) x {ops} ops x {payload} B; byte counts consistent, "
                  f"every payload byte counted on the {PLANES.get(a.transport, a.transport)} data plane"]


def serve():
    """One request per stdin line (tab-separated arguments); answers 'PASS LINE' or
    'FAIL N' and N lines. Saves a Python start per case: that costs 1-2 s in the guest."""
    p = parser()
    for line in sys.stdin:
        try:
            ok, lines = check(p.parse_args(line.rstrip("\n").split("\t")))
        except SystemExit:  # argparse already printed the usage error to stderr
            ok, lines = False, [f"bad check arguments: {line.strip()}"]
        lines = [l.replace("\n", " ") for l in lines]
        if ok:
            print("PASS " + lines[0], flush=True)
        else:
            print(f"FAIL {len(lines)}", *lines, sep="\n", flush=True)
    return 0


def main():
    if sys.argv[1:] == ["--serve"]:
        return serve()
    ok, lines = check(parser().parse_args())
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
