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
                what = ("tcp" if r["tool"] == "tcp-floor" else "grpc-unary") + "/" + r["test"]
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
        print("| payload | TCP floor | gRPC unary baseline | psbench non-ser. | psbench ser. | non-ser. busy-poll | non-ser. / baseline |")
        print("|---|---|---|---|---|---|---|")
        for size in [32, 65536, 1048576, 4194304, "skew"]:
            g = lambda w: med.get((place, w, size))
            ns = g("psbench/latency/non-serialized")
            base = g("grpc-unary/pingpong")
            row = [g("tcp/pingpong"), base, ns, g("psbench/latency/serialized"),
                   g("psbench/latency/non-serialized+busy-poll")]
            ratio = f"{ns / base:.2f}" if ns and base else "-"
            label = "skew (6x1MiB 3x10KiB 1x10B)" if size == "skew" else f"{size} B"
            print(f"| {label} | " + " | ".join(f"{v:.1f}" if v else "-" for v in row) + f" | {ratio} |")
        print("\nBandwidth (MB/s, 10^6 B/s):\n")
        print("| payload | TCP floor | gRPC async baseline | psbench non-ser. | psbench ser. | non-ser. / TCP | non-ser. / ser. |")
        print("|---|---|---|---|---|---|---|")
        for size in [1048576, 4194304]:
            g = lambda w: med.get((place, w, size))
            tcp, ns, ser = g("tcp/stream"), g("psbench/bandwidth/non-serialized"), g("psbench/bandwidth/serialized")
            row = [tcp, g("grpc-unary/stream"), ns, ser]
            r1 = f"{100 * ns / tcp:.0f} %" if ns and tcp else "-"
            r2 = f"{ns / ser:.2f}" if ns and ser else "-"
            print(f"| {size} B | " + " | ".join(f"{v:.0f}" if v else "-" for v in row) + f" | {r1} | {r2} |")


if __name__ == "__main__":
    main()
