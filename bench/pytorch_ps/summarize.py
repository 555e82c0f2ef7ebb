#!/usr/bin/env python3
"""Summarises bench/pytorch_ps/compare.sh's records: medians over rounds of the aggregate step
rate (the sum of the workers' steps/s) of each configuration, psbench's best asynchronous
configuration against PyTorch's best (its PS is asynchronous: a lock per step), and each
against the memory-traffic bound of a step with every CPU copying."""
import collections
import json
import statistics
import sys
from pathlib import Path


def lines(path):
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "pytorch-ps-out")
    copy = {r["threads"]: r["gb_per_s"] * 1e9 for r in lines(out / "copy.jsonl")}
    rates = collections.defaultdict(list)  # (workers, config) -> aggregate step/s per round
    model_bytes = None
    for r in lines(out / "pytorch.jsonl"):
        if r.get("kind") == "pytorch_rpc_ps_summary":
            rates[(r["workers"], f"PyTorch RPC, {r['threads']} thread(s)")].append(r["steps_per_s"])
    runs = collections.defaultdict(list)
    for r in lines(out / "psbench.jsonl"):
        if r.get("kind") == "updates" and r.get("scope") == "worker":
            if r.get("result") != "exact":
                sys.exit(f"summarize: run {r['run_id']} was not exact: {r.get('problems')}")
            runs[r["run_id"]].append(r)
            model_bytes = sum(r["tensor_bytes"])
    for recs in runs.values():
        r = recs[0]
        if len(recs) != r["workers"]:
            sys.exit(f"summarize: run {r['run_id']} has {len(recs)} worker records of {r['workers']}")
        mode = "sync" if r["sync"] else "async"
        rates[(r["workers"], f"psbench {r['transport']}, {mode}")].append(sum(x["steps_per_s"] for x in recs))
    if not rates:
        sys.exit("summarize: no records")

    # A step must move the gradients in (one copy), apply them (read g and w, write w: 1.5
    # copies' traffic) and move the parameters out (one copy): 3.5 copies of the model.
    print("| workers | configuration | rounds | aggregate step/s (median) | min-max | of the bound (all CPUs) |")
    print("|---:|---|---:|---:|---|---:|")
    best = {}
    for (w, config), v in sorted(rates.items()):
        med = statistics.median(v)
        frac = ""
        if model_bytes and copy:
            bound = max(copy.values()) / (3.5 * model_bytes)
            frac = f"{100 * med / bound:.0f} %"
        print(f"| {w} | {config} | {len(v)} | {med:.2f} | {min(v):.2f}-{max(v):.2f} | {frac} |")
        side = "psbench" if config.startswith("psbench") else "pytorch"
        if config.endswith(", sync"):
            continue  # PyTorch's PS has no sync mode to set against it
        if med > best.get((w, side), (0, ""))[0]:
            best[(w, side)] = (med, config)
    print()
    for w in sorted({w for w, _ in rates}):
        p, t = best.get((w, "psbench")), best.get((w, "pytorch"))
        if p and t:
            print(f"{w} worker(s): psbench's best asynchronous ({p[1]}, {p[0]:.2f} step/s) is {p[0] / t[0]:.2f}x "
                  f"PyTorch's best ({t[1]}, {t[0]:.2f} step/s)")
    if model_bytes and copy:
        for threads, c in sorted(copy.items()):
            print(f"bound with {threads} copy thread(s): {c / 1e9:.1f} GB/s copied, 3.5 x {model_bytes / 1e6:.1f} MB "
                  f"per step -> {c / (3.5 * model_bytes):.1f} step/s")


if __name__ == "__main__":
    main()
