#!/usr/bin/env python3
"""Summarizes bench/mpi/compare.sh: medians over rounds of the raw MPI floor (at
MPI_THREAD_SINGLE, and at MPI_THREAD_FUNNELED, the level grpc+mpi must ask for), psbench over
grpc+mpi and psbench over grpc, with the targets: a 32 B round trip of at most 1.0 us, and
from 64 KiB up grpc+mpi within 1.1x of the floor (latency at most 1.1x, bandwidth at least
1/1.1 of the stream), both better than grpc. Ratios are against the SINGLE floor, the
strongest, at its best round (lowest p50, highest MB/s: the floor as fast as this machine
let it run), psbench at its median. Prints a Markdown table; writes summary.json next to the
inputs."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "mpi-compare-out")
lat = defaultdict(lambda: defaultdict(list))  # lat[source][bytes] = [p50 us]
bw = defaultdict(lambda: defaultdict(list))   # bw[source][bytes] = [MB/s]
for path in out.glob("*.jsonl"):
    source = path.stem
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if source.startswith("floor"):
            size = r["bytes"]
            if r["test"] == "pingpong":
                lat[source][size].append(r["latency_us"]["p50"])
            else:
                bw[source][size].append(r["mb_per_s"])
        else:
            size = r["payload_bytes"]
            if r["benchmark"] == "latency":
                lat[source][size].append(r["latency_us"]["p50"])
            elif r["benchmark"] == "bandwidth":
                bw[source][size].append(r["mb_per_s"])

summary = []
print("| bytes | MPI p50 us best / median | MPI funneled p50 us | grpc+mpi p50 us | ratio to best | grpc p50 us "
      "| MPI MB/s best / median | MPI funneled MB/s | grpc+mpi MB/s | share of best | grpc MB/s | targets |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for size in sorted(lat["floor"]):
    m = {k: statistics.median(v[size]) for k, v in lat.items() if v.get(size)}
    b = {k: statistics.median(v[size]) for k, v in bw.items() if v.get(size)}
    rounds = min(len(v[size]) for v in list(lat.values()) + list(bw.values()) if v.get(size))
    best_lat, best_bw = min(lat["floor"][size]), max(bw["floor"][size])
    ratio = m["grpc+mpi"] / best_lat
    share = b["grpc+mpi"] / best_bw
    checks = []
    if size <= 32:
        checks = [("p50<=1.0us", m["grpc+mpi"] <= 1.0)]
    elif size >= 65536:
        checks = [
            ("lat<=1.1x", ratio <= 1.1),
            ("bw>=1/1.1", share >= 1 / 1.1),
            ("lat<grpc", m["grpc+mpi"] < m["grpc"]),
            ("bw>grpc", b["grpc+mpi"] > b["grpc"]),
        ]
    verdict = ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in checks) or "-"
    funneled = m.get("floor-funneled", float("nan"))
    funneled_bw = b.get("floor-funneled", float("nan"))
    print(f"| {size} | {best_lat:.2f} / {m['floor']:.2f} | {funneled:.2f} | {m['grpc+mpi']:.2f} | {ratio:.2f}x "
          f"| {m['grpc']:.2f} | {best_bw:.0f} / {b['floor']:.0f} | {funneled_bw:.0f} | {b['grpc+mpi']:.0f} "
          f"| {share:.0%} | {b['grpc']:.0f} | {verdict} |")
    summary.append({"bytes": size, "rounds": rounds, "p50_us": m, "mb_per_s": b,
                    "floor_best_p50_us": best_lat, "floor_best_mb_per_s": best_bw,
                    "latency_ratio": ratio, "bandwidth_share": share})
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
