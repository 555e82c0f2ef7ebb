#!/usr/bin/env python3
"""Medians of perftest_compare.sh's outputs as a Markdown table, with ratios.

perftest prints MB/sec as 2^20 bytes per second; psbench's MB/s is 10^6. Both are shown in
10^6 B/s here. Latency: perftest's t_typical (its median) against psbench's p50; ib_write_lat
reports half the round trip, psbench the whole echo round trip, so the table compares psbench's
p50 / 2 with t_typical (both one-way) and also shows the round trip.
"""
import glob
import json
import re
import statistics
import sys


def perftest_values(out, tool, size):
    vals = []
    for path in sorted(glob.glob(f"{out}/{tool}-{size}-*.txt")):
        for line in open(path):
            cols = line.split()
            if len(cols) >= 5 and cols[0] == str(size) and re.match(r"^\d", cols[1]):
                if tool == "ib_write_lat":
                    vals.append(float(cols[4]))  # t_typical
                else:
                    vals.append(float(cols[3]) * 1048576 / 1e6)  # BW average
    return vals


def psbench_values(out):
    got = {}
    for line in open(f"{out}/psbench.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "comparison":
            continue
        if r.get("scope") != "worker":
            continue
        key = (r["transport"], r["benchmark"], int(r["payload_bytes"]))
        if r["benchmark"] == "latency":
            v = r["latency_us"]["p50"]
        else:
            v = r["mb_per_s"]
        got.setdefault(key, []).append(v)
    return got


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    out = sys.argv[1]
    ps = psbench_values(out)
    print("| size | ib_write_lat t_typical µs | psbench grpc+verbs p50/2 µs (round trip) | ratio | "
          "grpc p50/2 µs | n |")
    print("|---|---|---|---|---|---|")
    for size in (32, 65536, 1048576):
        pt = perftest_values(out, "ib_write_lat", size)
        v = ps.get(("grpc+verbs", "latency", size), [])
        g = ps.get(("grpc", "latency", size), [])
        print(f"| {size} | {med(pt):.1f} | {med(v)/2:.1f} ({med(v):.1f}) | {med(v)/2/med(pt):.2f}x | "
              f"{med(g)/2:.1f} | {len(pt)}/{len(v)}/{len(g)} |")
    print()
    print("| size | ib_write_bw MB/s | psbench grpc+verbs MB/s | % of perftest | grpc MB/s | "
          "grpc+verbs / grpc | n |")
    print("|---|---|---|---|---|---|---|")
    for size in (32, 65536, 1048576):
        pt = perftest_values(out, "ib_write_bw", size)
        v = ps.get(("grpc+verbs", "bandwidth", size), [])
        g = ps.get(("grpc", "bandwidth", size), [])
        print(f"| {size} | {med(pt):.1f} | {med(v):.1f} | {100*med(v)/med(pt):.0f} % | {med(g):.1f} | "
              f"{med(v)/med(g):.2f}x | {len(pt)}/{len(v)}/{len(g)} |")


if __name__ == "__main__":
    main()
