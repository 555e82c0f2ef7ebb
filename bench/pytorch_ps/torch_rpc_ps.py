#!/usr/bin/env python3
"""A parameter server on PyTorch RPC: the reference psbench's PS step is measured against.

One PS process holds float32 parameters shaped like a psbench trace's tensors (e.g.
payloads/traces/vgg11.json). Every step each worker sends its gradients with rpc_sync; the
PS applies SGD to them under a lock (learning rate 1, momentum 0: psbench's
`--benchmark=updates --async`) and returns its parameters. TensorPipe moves the tensors
(shared memory and cross-memory attach between processes of one machine).

The timing matches psbench's updates worker: an initial exchange, a start barrier, then
`--steps` timed steps; steps/s = steps / seconds, per worker.

  python3 bench/pytorch_ps/torch_rpc_ps.py --trace=payloads/traces/vgg11.json --workers=2

Prints one JSON line per worker ("kind": "pytorch_rpc_ps") and one summary line
("kind": "pytorch_rpc_ps_summary") with the aggregate rate. --copy-bandwidth adds a line
with this machine's memcpy bandwidth (512 MiB, best of 5; one thread, and one per CPU).
"""
import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

# The PS's state (set in the PS process only).
_PARAMS = []
_LOCK = threading.Lock()
_SNAPSHOT = True
_BARRIER = None


def _ps_init(values):
    """The first worker's initial values set the parameters; every worker gets them back."""
    global _PARAMS
    with _LOCK:
        if not _PARAMS:
            _PARAMS = [v.clone() for v in values]
        return [p.clone() for p in _PARAMS]


def _ps_start():
    _BARRIER.wait()


def _ps_step(grads):
    with _LOCK:
        for p, g in zip(_PARAMS, grads):
            p.sub_(g)
        # With one worker nothing can change the parameters before it has received them,
        # so TensorPipe may send them from where they are; with more, a snapshot taken
        # under the lock keeps a reply from being torn by another worker's update.
        return [p.clone() for p in _PARAMS] if _SNAPSHOT else _PARAMS


def _shapes(trace_path):
    with open(trace_path) as f:
        trace = json.load(f)
    params = trace.get("params")
    if not isinstance(params, list) or not params:
        sys.exit(f"torch_rpc_ps: {trace_path}: no 'params' list")
    shapes = []
    for p in params:
        if p.get("dtype", "float32") not in ("float32", "torch.float32"):
            sys.exit(f"torch_rpc_ps: {trace_path}: tensor {p.get('name')}: dtype {p['dtype']} is not float32")
        shapes.append(tuple(int(d) for d in p["shape"]))
    return trace.get("model", os.path.basename(trace_path)), shapes


def _run(rank, args, rendezvous, shapes, out):
    global _SNAPSHOT, _BARRIER
    torch.set_num_threads(args.threads)
    opts = rpc.TensorPipeRpcBackendOptions(
        init_method=rendezvous, num_worker_threads=max(8, 2 * args.workers + 2),
        rpc_timeout=600)
    if rank == 0:
        _SNAPSHOT = args.snapshot == "always" or (args.snapshot == "auto" and args.workers > 1)
        _BARRIER = threading.Barrier(args.workers)
        rpc.init_rpc("ps", rank=0, world_size=args.workers + 1, rpc_backend_options=opts)
        rpc.shutdown()  # waits for every worker
        return
    me = rank - 1
    rpc.init_rpc(f"worker{me}", rank=rank, world_size=args.workers + 1, rpc_backend_options=opts)
    gen = torch.Generator().manual_seed(args.seed + me)
    values = [torch.rand(s, generator=gen) for s in shapes]
    params = rpc.rpc_sync("ps", _ps_init, args=(values,))
    grads = [torch.rand(s, generator=gen).mul_(1e-3) for s in shapes]
    payload = sum(g.numel() * g.element_size() for g in grads)
    rpc.rpc_sync("ps", _ps_start)
    start = time.perf_counter()
    for _ in range(args.steps):
        params = rpc.rpc_sync("ps", _ps_step, args=(grads,))
    seconds = time.perf_counter() - start
    del params
    out.put({"kind": "pytorch_rpc_ps", "worker": me, "workers": args.workers, "steps": args.steps,
             "seconds": seconds, "steps_per_s": args.steps / seconds,
             "mb_per_s": args.steps * payload / seconds / 1e6, "payload_bytes": payload})
    rpc.shutdown()


def _copy_bandwidth(threads):
    """memcpy bandwidth (bytes copied per second) of 512 MiB with `threads` threads."""
    torch.set_num_threads(threads)
    n = 512 << 20
    src = torch.ones(n // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t)
    return {"kind": "copy_bandwidth", "bytes": n, "threads": threads, "gb_per_s": n / best / 1e9,
            "how": "torch.Tensor.copy_ of 512 MiB float32 (faulted in first), best of 5"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True, help="a psbench trace (its 'params' give the tensors)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--snapshot", choices=("auto", "always", "never"), default="auto",
                    help="copy the parameters under the lock before replying (auto: with 2+ workers)")
    ap.add_argument("--malloc-hugepages", choices=("on", "off"), default="on",
                    help="GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in the PS and the workers (default on)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds the whole run may take (default 900)")
    ap.add_argument("--copy-bandwidth", action="store_true", help="also measure memcpy bandwidth (1 thread and one per CPU)")
    args = ap.parse_args()
    if not 1 <= args.workers <= 64:
        sys.exit("torch_rpc_ps: --workers must be in [1, 64]")
    if not 1 <= args.steps <= 100000:
        sys.exit("torch_rpc_ps: --steps must be in [1, 100000]")
    if not 0 < args.timeout <= 86400:
        sys.exit("torch_rpc_ps: --timeout must be in (0, 86400] seconds")
    if not 1 <= args.threads <= 256:
        sys.exit("torch_rpc_ps: --threads must be in [1, 256]")
    model, shapes = _shapes(args.trace)
    # TensorPipe receives every tensor into fresh memory. glibc maps large blocks without
    # transparent huge pages unless asked, and a page fault per 4 KiB then costs more than
    # the copy (a 256 MiB echo: 2.2 s without, 0.06 s with, on this project's VM). psbench
    # lays its payloads out on huge pages too, so this is the fair setting.
    if args.malloc_hugepages == "on":
        tunables = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t]
        tunables = [t for t in tunables if not t.startswith("glibc.malloc.hugetlb=")]
        os.environ["GLIBC_TUNABLES"] = ":".join(tunables + ["glibc.malloc.hugetlb=1"])
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    # The processes meet through a file: a free port picked here could be taken by another
    # program before the PS binds it (TensorPipe then picks its own ports).
    scratch = tempfile.mkdtemp(prefix="torch_rpc_ps-")
    atexit.register(shutil.rmtree, scratch, True)
    rendezvous = "file://" + os.path.join(scratch, "rendezvous")
    procs = [ctx.Process(target=_run, args=(r, args, rendezvous, shapes, out)) for r in range(args.workers + 1)]
    for p in procs:
        p.start()
    # One process that dies leaves the others waiting in rpc.shutdown(): end them all.
    deadline = time.monotonic() + args.timeout
    while any(p.is_alive() for p in procs):
        failed = any(p.exitcode not in (None, 0) for p in procs)
        if failed or time.monotonic() > deadline:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join()
            why = "a process failed" if failed else f"not done within --timeout={args.timeout}s"
            sys.exit(f"torch_rpc_ps: {why} (exit codes, PS first: {[p.exitcode for p in procs]})")
        time.sleep(0.05)
    if any(p.exitcode != 0 for p in procs):
        sys.exit(f"torch_rpc_ps: a process failed (exit codes, PS first: {[p.exitcode for p in procs]})")
    lines = sorted((out.get() for _ in range(args.workers)), key=lambda r: r["worker"])
    how = {"trace": args.trace, "model": model, "tensors": len(shapes), "torch": torch.__version__,
           "backend": "tensorpipe", "threads": args.threads, "snapshot": args.snapshot,
           "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
           "learning_rate": 1.0, "momentum": 0.0, "mode": "async (lock per step)"}
    for r in lines:
        print(json.dumps({**r, **how}))
    print(json.dumps({"kind": "pytorch_rpc_ps_summary", "workers": args.workers, "steps": args.steps,
                      "steps_per_s": sum(r["steps_per_s"] for r in lines),
                      "min_worker_steps_per_s": min(r["steps_per_s"] for r in lines), **how}))
    if args.copy_bandwidth:
        for threads in sorted({1, os.cpu_count() or 1}):
            print(json.dumps(_copy_bandwidth(threads)))


if __name__ == "__main__":
    main()
