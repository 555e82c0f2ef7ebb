"""Captures a PyTorch training job's gradient traffic as a psbench trace (psbench-trace/2).

    import psbench_trace
    with psbench_trace.capture(model, "my_model.trace.json") as trace:
        for x, y in batches:
            with trace.step():
                ...  # forward, backward, optimizer step, as before

Per step it records when each parameter's gradient became ready (autograd hooks that only
observe), the step's compute time and, for a model wrapped in DistributedDataParallel or on
request, DDP-style gradient buckets and their ready times. `psbench run --scheme=trace
--trace=FILE` replays the file over any transport. See docs/replay.md.
"""
from .buckets import assign_buckets, bucket_ready
from .trace_format import FORMAT

__all__ = ["FORMAT", "Tracer", "capture", "assign_buckets", "bucket_ready"]
__version__ = "0.1"

try:
    from .capture import Tracer, capture
except ModuleNotFoundError as e:
    if e.name != "torch":
        raise

    # The capture needs PyTorch; import_profile and the bucket helpers do not, so the package
    # imports without it and says so only when the capture is asked for.
    def __getattr__(name):
        if name in ("Tracer", "capture"):
            raise ImportError("psbench_trace: the capture needs PyTorch, which this Python lacks "
                              "(Debian: apt install python3-torch, then run /usr/bin/python3)")
        raise AttributeError(f"module 'psbench_trace' has no attribute {name!r}")
