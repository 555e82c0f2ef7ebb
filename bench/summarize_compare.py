#!/usr/bin/env python3
"""Prints the medians of bench/compare.sh's JSON Lines as Markdown tables."""
import collections
import glob
import json
import os
import statistics
import sys


def load(out_dir):
    cells = collections.defaultdict(list)  # (placement, what, bytes) -> [values]
    for path in sorted(glob.glob(os.path.join(out_dir, "*.jsonl"))):
        server, client, _ = os.path.basename(path).split("-")[:3]
        place = f"{server}/{client}"
        for line in open(path):
            r = json.loads(line)
            if "tool" in r:  # a floor
                names = {"tcp-floor": "tcp", "grpc-unary-baseline": "grpc-unary", "grpc-generic-floor": "grpc-generic",
                         "grpc-async-floor": "grpc-async"}
                if r["tool"] not in names:  # another floor's record: not in these tables
                    continue
                what = names[r["tool"]] + "/" + r["test"]
                size = r["bytes"]
                value = r["latency_us"]["p50"] if r["test"] == "pingpong" else r["mb_per_s"]
            else:
                bp = "+busy-poll" if r["config"].get("busy_poll") else ""
                what = f'psbench/{r["benchmark"]}/{r["mode"]}{bp}'
                size = "skew" if r["scheme"] == "skew" else r["payload_bytes"]
                value = r["latency_us"]["p50"] if r["benchmark"] == "latency" else r["mb_per_s"]
            cells[(place, what, size)].append(value)
    return cells


def main():
    cells = load(sys.argv[1])
    med = {k: statistics.median(v) for k, v in cells.items()}
    reps = max(len(v) for v in cells.values())
    for place in sorted({k[0] for k in med}):
        server, client = place.split("/")
        print(f"\n### Server on CPU {server}, client on CPU {client} (median of {reps})\n")
        print("Latency, p50 round trip (µs):\n")
        # Each psbench mode against the strongest floor on the API it uses: non-serialized
        # against the async generic echo, serialized against the protobuf async echo.
        print("| payload | TCP floor | gRPC generic floor | gRPC async floor | gRPC unary floor | psbench non-ser. | psbench ser. | non-ser. busy-poll | non-ser. / generic | ser. / async |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for size in [32, 65536, 1048576, 4194304, "skew"]:
            g = lambda w: med.get((place, w, size))
            ns, ser = g("psbench/latency/non-serialized"), g("psbench/latency/serialized")
            generic, asyn = g("grpc-generic/pingpong"), g("grpc-async/pingpong")
            row = [g("tcp/pingpong"), generic, asyn, g("grpc-unary/pingpong"), ns, ser,
                   g("psbench/latency/non-serialized+busy-poll")]
            r1 = f"{ns / generic:.2f}" if ns and generic else "-"
            r2 = f"{ser / asyn:.2f}" if ser and asyn else "-"
            label = "skew (6x1MiB 3x10KiB 1x10B)" if size == "skew" else f"{size} B"
            print(f"| {label} | " + " | ".join(f"{v:.1f}" if v else "-" for v in row) + f" | {r1} | {r2} |")
        print("\nBandwidth (MB/s, 10^6 B/s):\n")
        print("| payload | TCP floor | gRPC generic floor | gRPC async floor | gRPC unary floor | psbench non-ser. | psbench ser. | non-ser. / generic | ser. / async |")
        print("|---|---|---|---|---|---|---|---|---|")
        for size in [1048576, 4194304]:
            g = lambda w: med.get((place, w, size))
            ns, ser = g("psbench/bandwidth/non-serialized"), g("psbench/bandwidth/serialized")
            generic, asyn = g("grpc-generic/stream"), g("grpc-async/stream")
            row = [g("tcp/stream"), generic, asyn, g("grpc-unary/stream"), ns, ser]
            r1 = f"{ns / generic:.2f}" if ns and generic else "-"
            r2 = f"{ser / asyn:.2f}" if ser and asyn else "-"
            print(f"| {size} B | " + " | ".join(f"{v:.0f}" if v else "-" for v in row) + f" | {r1} | {r2} |")


if __name__ == "__main__":
    main()
