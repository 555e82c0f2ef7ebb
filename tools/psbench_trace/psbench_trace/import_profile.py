"""Turns a profile of one training step, from PyTorch 1.13's own tools, into a psbench trace.

    python3 -m psbench_trace.import_profile --execution-graph EG.json [--chrome-trace TRACE.json] OUT.json

What is read:
- EG.json, from torch.profiler.ExecutionGraphObserver: every gradient the step accumulated
  into a parameter (its `torch::autograd::AccumulateGrad` node): shape, dtype and bytes, in the
  order backward produced them. Parameter names are not in the file; a gradient is named by
  its position (grad_0 is the first ready).
- TRACE.json (optional), the legacy profiler's chrome trace of the same step
  (torch.autograd.profiler.profile(use_kineto=False), export_chrome_trace): when each of
  those AccumulateGrad calls ended, matched in order. The step runs from the trace's first
  event to its last.

What comes out: with both files, a psbench-trace/2 of one step (sizes, order and times); with
the execution graph alone, the reference traces' `params` form (sizes and order only, for
back-to-back replay). Debian's torch 1.13 is built without Kineto: torch.profiler.profile
exports an empty chrome trace there, and the legacy profiler's export has times but no shapes,
hence two files.
"""
import argparse
import json
import math
import os
import stat
import sys

from .trace_format import FORMAT

ACCUMULATE = "torch::autograd::AccumulateGrad"
DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
          "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
          "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
          "c10::complex<double>": "complex128"}


class ImportError_(Exception):
    pass


def gradients(eg):
    """[(shape, dtype, bytes)] of the AccumulateGrad nodes, in execution order."""
    nodes = eg.get("nodes") if isinstance(eg, dict) else None
    if not isinstance(nodes, list):
        raise ImportError_("not an execution graph (no 'nodes' list)")
    out = []
    for n in sorted((n for n in nodes if isinstance(n, dict) and n.get("name") == ACCUMULATE),
                    key=lambda n: n.get("id", 0)):
        try:
            shape, kind, tensor = n["input_shapes"][0], n["input_types"][0], n["inputs"][0]
            numel, itemsize = int(tensor[3]), int(tensor[4])
        except (KeyError, IndexError, TypeError, ValueError):
            raise ImportError_(f"node {n.get('id')}: an AccumulateGrad without its gradient's shape and type")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(kind, str) or numel < 0 or itemsize < 1):
            raise ImportError_(f"node {n.get('id')}: an AccumulateGrad whose gradient's shape, type or size "
                               f"is not one (shape {shape!r}, {numel} elements of {itemsize} bytes)")
        inner = kind[len("Tensor("):-1] if kind.startswith("Tensor(") and kind.endswith(")") else kind
        if inner not in DTYPES:
            raise ImportError_(f"node {n.get('id')}: unknown tensor type {kind!r}")
        out.append((list(shape), DTYPES[inner], numel * itemsize))
    if not out:
        raise ImportError_(f"no {ACCUMULATE} node: was a backward pass inside the observed region?")
    return out


def ready_times(chrome, count):
    """(compute_us, [ready_us]) of the step in a legacy chrome trace, `count` gradients."""
    events = chrome.get("traceEvents") if isinstance(chrome, dict) else chrome
    if not isinstance(events, list) or not events:
        raise ImportError_("an empty chrome trace (torch.profiler without Kineto writes one: use "
                           "torch.autograd.profiler.profile(use_kineto=False))")
    number = (int, float)
    timed = [e for e in events if isinstance(e, dict) and isinstance(e.get("ts"), number)
             and isinstance(e.get("dur", 0), number) and e.get("dur", 0) >= 0]
    if not timed:
        raise ImportError_("the chrome trace has no event with a time ('ts') and a duration ('dur', >= 0)")
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    acc = sorted((e for e in timed if e.get("name") == ACCUMULATE), key=lambda e: e["ts"])
    if len(acc) != count:
        raise ImportError_(f"the chrome trace has {len(acc)} {ACCUMULATE} calls, the execution graph "
                           f"{count}: not the same step")
    return end - start, [e["ts"] + e.get("dur", 0) - start for e in acc]


def convert(eg, chrome=None):
    grads = gradients(eg)
    source = {"tool": "psbench_trace.import_profile", "from": "torch.profiler.ExecutionGraphObserver" +
              (" and the legacy profiler's chrome trace" if chrome is not None else "")}
    names = [f"grad_{k}" for k in range(len(grads))]
    if chrome is None:
        return {"source": source, "params": [{"name": name, "shape": shape, "dtype": dtype, "bytes": size,
                                              "grad_ready_order": k}
                                             for k, (name, (shape, dtype, size)) in enumerate(zip(names, grads))]}
    compute, ready = ready_times(chrome, len(grads))
    return {"format": FORMAT, "source": source,
            "tensors": [{"name": name, "shape": shape, "dtype": dtype, "bytes": size}
                        for name, (shape, dtype, size) in zip(names, grads)],
            "steps": [{"start_us": 0.0, "compute_us": round(compute, 3), "ready_us": [round(r, 3) for r in ready]}]}


def _refuse_constant(name):
    raise ValueError(f"{name} is not a number JSON holds")


def load(path, flag):
    """The JSON in a regular file (a FIFO or a device would be waited on, or read without end)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise ImportError_(f"{flag}={path}: {e.strerror}")
    if not stat.S_ISREG(mode):
        raise ImportError_(f"{flag}={path}: not a regular file")
    try:
        with open(path) as f:
            return json.load(f, parse_constant=_refuse_constant)
    except (OSError, ValueError, RecursionError) as e:
        raise ImportError_(f"{flag}={path}: {e}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m psbench_trace.import_profile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--execution-graph", required=True, help="torch.profiler.ExecutionGraphObserver's file")
    parser.add_argument("--chrome-trace", help="the legacy profiler's chrome trace of the same step")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    try:
        inputs = [(flag, path) for flag, path in (("--execution-graph", args.execution_graph),
                                                   ("--chrome-trace", args.chrome_trace)) if path]
        for flag, path in inputs:  # an input is never written over
            if os.path.exists(args.out) and os.path.samefile(path, args.out):
                raise ImportError_(f"{args.out} is the {flag} file: write the trace elsewhere")
        eg = load(args.execution_graph, "--execution-graph")
        chrome = load(args.chrome_trace, "--chrome-trace") if args.chrome_trace else None
        trace = convert(eg, chrome)
        text = json.dumps(trace, indent=1, allow_nan=False) + "\n"
    except (OSError, ValueError, ImportError_) as e:
        print(f"psbench_trace.import_profile: {e}", file=sys.stderr)
        return 2
    try:
        with open(args.out, "w") as f:
            f.write(text)
    except OSError as e:
        print(f"psbench_trace.import_profile: cannot write {args.out}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
