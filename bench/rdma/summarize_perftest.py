#!/usr/bin/env python3
"""Medians of perftest_compare.sh's outputs as Markdown tables, with ratios.

perftest prints MB/sec as 2^20 bytes per second; psbench's MB/s is 10^6: both are shown here
in 10^6 B/s. ib_write_lat reports half a round trip (t_typical is its median); psbench's
latency is the whole echo round trip, so psbench's p50 / 2 is compared with t_typical.
"""
import glob
import json
import re
import statistics
import sys

SIZES = (32, 65536, 1048576)


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
    for path in glob.glob(f"{out}/psbench-*.jsonl"):
        poll = path.rsplit("-", 1)[1].split(".")[0]
        for line in open(path):
            r = json.loads(line)
            if r.get("scope") != "worker":
                continue
            key = (poll, r["transport"], r["benchmark"], int(r["payload_bytes"]))
            v = r["latency_us"]["p50"] if r["benchmark"] == "latency" else r["mb_per_s"]
            got.setdefault(key, []).append(v)
    return got


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    out = sys.argv[1]
    ps = psbench_values(out)
    print("Latency, busy polling (µs, one way = round trip / 2; medians):\n")
    print("| size | ib_write_lat t_typical | grpc+verbs p50/2 | grpc+verbs / perftest | "
          "grpc p50/2 | grpc+verbs / grpc | runs |")
    print("|---|---|---|---|---|---|---|")
    for size in SIZES:
        pt = perftest_values(out, "ib_write_lat", size)
        v = ps.get(("busy", "grpc+verbs", "latency", size), [])
        g = ps.get(("busy", "grpc", "latency", size), [])
        print(f"| {size} | {med(pt):.1f} | {med(v)/2:.1f} | {med(v)/2/med(pt):.2f}x | "
              f"{med(g)/2:.1f} | {med(v)/med(g):.2f}x | {len(pt)}/{len(v)}/{len(g)} |")
    print("\nBandwidth (MB/s = 10^6 B/s; medians):\n")
    print("| size | ib_write_bw | grpc+verbs busy | % | grpc+verbs event | % | grpc event | "
          "best grpc+verbs / grpc | runs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in SIZES:
        pt = perftest_values(out, "ib_write_bw", size)
        vb = ps.get(("busy", "grpc+verbs", "bandwidth", size), [])
        ve = ps.get(("event", "grpc+verbs", "bandwidth", size), [])
        g = ps.get(("event", "grpc", "bandwidth", size), [])
        best = max(med(vb), med(ve))
        print(f"| {size} | {med(pt):.1f} | {med(vb):.1f} | {100*med(vb)/med(pt):.0f} % | "
              f"{med(ve):.1f} | {100*med(ve)/med(pt):.0f} % | {med(g):.1f} | {best/med(g):.2f}x | "
              f"{len(pt)}/{len(vb)}/{len(ve)}/{len(g)} |")


if __name__ == "__main__":
    main()
