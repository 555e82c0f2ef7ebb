#!/usr/bin/env python3
"""Prints the medians of bench/compare.sh's JSON Lines as Markdown tables, and how far the
repetitions of each cell spread (max / min).

A ratio is the median of the repetitions' own ratios (psbench over its floor, both measured
in the same repetition, minutes apart), not the ratio of the medians: this VM drifts over a
run, and pairing takes the drift out."""
import collections
import glob
import json
import os
import statistics
import sys

FLOOR_NAMES = {"tcp-floor": "tcp", "grpc-unary-baseline": "grpc-unary", "grpc-generic-floor": "grpc-generic",
               "grpc-async-floor": "grpc-async"}


def load(out_dir):
    cells = collections.defaultdict(dict)  # (placement, what, bytes) -> {repetition: value}
    for path in sorted(glob.glob(os.path.join(out_dir, "*.jsonl"))):
        server, client, rep = os.path.basename(path).split("_")[:3]
        place = f"{server}/{client}"
        for line in open(path):
            r = json.loads(line)
            if "tool" in r:  # a floor
                if r["tool"] not in FLOOR_NAMES:  # another floor's record: not in these tables
                    continue
                what = FLOOR_NAMES[r["tool"]] + "/" + r["test"]
                size = r["bytes"]
                value = r["latency_us"]["p50"] if r["test"] == "pingpong" else r["mb_per_s"]
            else:
                bp = "+busy-poll" if r["config"].get("busy_poll") else ""
                what = f'psbench/{r["benchmark"]}/{r["mode"]}{bp}'
                size = "skew" if r["scheme"] == "skew" else r["payload_bytes"]
                value = r["latency_us"]["p50"] if r["benchmark"] == "latency" else r["mb_per_s"]
            cells[(place, what, size)][rep] = value
    return cells


def sizes_of(cells, place, whats):
    found = {k[2] for k in cells if k[0] == place and k[1] in whats}
    numbers = sorted(s for s in found if s != "skew")
    return numbers + (["skew"] if "skew" in found else [])


def label(size):
    return "skew (6x1MiB 3x10KiB 1x10B)" if size == "skew" else f"{size} B"


def mbps(v):
    return "-" if not v else f"{v:.0f}" if v >= 100 else f"{v:.2f}"


def paired_ratio(cells, place, size, num, den):
    """The median over repetitions of num / den, each pair from one repetition."""
    a, b = cells.get((place, num, size), {}), cells.get((place, den, size), {})
    ratios = [a[r] / b[r] for r in a if r in b and b[r]]
    return f"{statistics.median(ratios):.2f}" if ratios else "-"


LATENCY = ["tcp/pingpong", "grpc-generic/pingpong", "grpc-async/pingpong", "grpc-unary/pingpong",
           "psbench/latency/non-serialized", "psbench/latency/serialized",
           "psbench/latency/non-serialized+busy-poll"]
BANDWIDTH = ["tcp/stream", "grpc-generic/stream", "grpc-async/stream", "grpc-unary/stream",
             "psbench/bandwidth/non-serialized", "psbench/bandwidth/serialized"]
# Each psbench mode against the strongest floor on the API it uses: non-serialized against the
# async generic echo, serialized against the protobuf async echo.
SPREAD = [("grpc-generic/pingpong", "generic floor"), ("psbench/latency/non-serialized", "psbench non-ser."),
          ("grpc-async/pingpong", "async floor"), ("psbench/latency/serialized", "psbench ser."),
          ("grpc-generic/stream", "generic floor MB/s"), ("psbench/bandwidth/non-serialized", "psbench non-ser. MB/s"),
          ("grpc-async/stream", "async floor MB/s"), ("psbench/bandwidth/serialized", "psbench ser. MB/s")]


def print_tables(cells, place):
    med = {k: statistics.median(v.values()) for k, v in cells.items()}
    reps = max(len(v) for k, v in cells.items() if k[0] == place)
    server, client = place.split("/")
    g = lambda w, size: med.get((place, w, size))
    print(f"\n### Server on CPU {server}, client on CPU {client} (median of {reps})\n")
    print("Latency, p50 round trip (µs):\n")
    print("| payload | TCP floor | gRPC generic floor | gRPC async floor | gRPC unary floor | psbench non-ser. | psbench ser. | non-ser. busy-poll | non-ser. / generic | ser. / async |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in sizes_of(cells, place, LATENCY):
        row = [g(w, size) for w in LATENCY]
        print(f"| {label(size)} | " + " | ".join(f"{v:.1f}" if v else "-" for v in row)
              + f" | {paired_ratio(cells, place, size, LATENCY[4], LATENCY[1])}"
              + f" | {paired_ratio(cells, place, size, LATENCY[5], LATENCY[2])} |")
    print("\nBandwidth (MB/s, 10^6 B/s; a ratio above 1 means psbench moved more):\n")
    print("| payload | TCP floor | gRPC generic floor | gRPC async floor | gRPC unary floor | psbench non-ser. | psbench ser. | non-ser. / generic | ser. / async |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in sizes_of(cells, place, BANDWIDTH):
        row = [g(w, size) for w in BANDWIDTH]
        print(f"| {label(size)} | " + " | ".join(mbps(v) for v in row)
              + f" | {paired_ratio(cells, place, size, BANDWIDTH[4], BANDWIDTH[1])}"
              + f" | {paired_ratio(cells, place, size, BANDWIDTH[5], BANDWIDTH[2])} |")
    if reps < 2:
        return
    print(f"\nSpread of the {reps} repetitions, max / min of each cell's values:\n")
    whats = [w for w, _ in SPREAD]
    print("| payload | " + " | ".join(name for _, name in SPREAD) + " |")
    print("|---|" + "---|" * len(SPREAD))
    for size in sizes_of(cells, place, whats):
        spreads = []
        for w in whats:
            v = list(cells.get((place, w, size), {}).values())
            spreads.append(f"{max(v) / min(v):.2f}" if v and len(v) > 1 and min(v) > 0 else "-")
        print(f"| {label(size)} | " + " | ".join(spreads) + " |")


def main():
    cells = load(sys.argv[1])
    for place in sorted({k[0] for k in cells}):
        print_tables(cells, place)


if __name__ == "__main__":
    main()
