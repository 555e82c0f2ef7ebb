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
from .capture import FORMAT, Tracer, capture

__all__ = ["FORMAT", "Tracer", "capture", "assign_buckets", "bucket_ready"]
__version__ = "0.1"
